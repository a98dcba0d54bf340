"""``harness repro``: rebuild a run from its run folder (or a loose JUnit file) and run
its failed tests again the same way: recorded matrix, seed, emulation, runner, thread
environment and shard, through the same workflow as ``harness run``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, Unpack

from harness.errors import ConfigError, ConfigErrors, HarnessError, UsageError
from harness.matrix import load_matrix
from harness.matrix.model import Matrix
from harness.matrix.suite_paths import suite_places
from harness.platform.budget import cpu_budget
from harness.platform.cache import cache_env
from harness.platform.gitinfo import git_info
from harness.repro.pick import pick_tests, read_suite
from harness.repro.trust import matrix_diff, matrix_problems, node_id_problems, split_env
from harness.results import layout
from harness.results.junit_read import suite_properties
from harness.results.layout import Shard
from harness.results.run_folder import RunFolder, read_run
from harness.run.request import RunRequest

# Set by the workflow for this machine; the recorded values name the run's machine.
_MACHINE_ENV = frozenset({"HARNESS_ROOT", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"})
MASKED = "***"


@dataclass(frozen=True, kw_only=True)
class Recorded:
    """What a run folder's manifest, or a loose JUnit file's properties, say."""

    run_id: str
    run_dir: Path | None
    junit_files: tuple[Path, ...]
    matrix_name: str
    matrix_hash: str
    matrix_file: str | None = None
    emulate: bool = False
    seed: int = 0
    shard: str | None = None
    runner: str | None = None
    image: str | None = None
    git_sha: str | None = None
    git_dirty: bool | None = None
    workers: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    suite_threads: dict[str, int] = field(default_factory=dict)  # SuiteOutcome.threads
    planned: tuple[str, ...] = ()
    pins: tuple[str, ...] = ()  # the run's --pin overrides (its matrix.json has them in place)
    folder: RunFolder | None = None  # the run folder as the one reader read it (no loose JUnit)

    @property
    def resolved(self) -> Path | None:
        path = self.run_dir / layout.MATRIX if self.run_dir else None
        return path if path and path.is_file() else None


def say(message: str) -> None:
    print(f"harness repro: {message}", flush=True)


def _run_folder_of(target: Path) -> Path | None:
    """The run folder itself, its junit/ folder, merged.xml, or junit/<suite>.xml."""
    folder = target if target.is_dir() else target.parent
    candidates = [folder, folder.parent] if folder.name == layout.JUNIT_DIR else [folder]
    return next((c for c in candidates if (c / layout.MANIFEST).is_file()), None)


def read_recorded(target: Path) -> Recorded:
    if not target.exists():
        raise UsageError(f"{target}: no such run folder or JUnit file")
    run_dir = _run_folder_of(target)
    if target.is_dir() and run_dir is None:
        raise UsageError(f"{target}: not a run folder (no {layout.MANIFEST})")
    if run_dir is None:
        return _from_loose_junit(target)
    folder = read_run(run_dir, lambda line: say(f"warning: {line}"))
    record = folder.record
    in_junit = target.is_file() and target.parent.name == layout.JUNIT_DIR
    # the suites' own files, as the one reader read them (a folder with none: nothing to pick)
    junit = (target,) if in_junit else tuple(p for p in folder.junit
                                             if p.parent.name == layout.JUNIT_DIR)
    workers = record.threads.workers if record.threads else None
    return Recorded(
        run_id=record.run_id,
        run_dir=run_dir,
        junit_files=junit,
        matrix_name=record.matrix.name,
        matrix_hash=record.matrix.hash,
        matrix_file=record.matrix.file or None,
        emulate=record.emulate,
        seed=record.seed,
        shard=record.shard,
        runner=record.runner,
        image=record.image,
        git_sha=record.git.sha,
        git_dirty=record.git.dirty,
        workers=workers if isinstance(workers, int) else None,
        env=dict(record.env),
        suite_threads={s.suite: s.threads for s in record.suites if s.threads is not None},
        planned=() if in_junit else tuple(record.suites_planned),
        pins=tuple(p.requirement for p in record.pins),
        folder=folder,
    )


def _from_loose_junit(junit: Path) -> Recorded:
    """A JUnit file on its own (a CI artifact): the plugin's suite properties name the
    platform it ran under; everything else about the run was in its folder."""
    problems: list[str] = []
    props = suite_properties(junit, problems.append)
    if props is None and problems:
        raise ConfigError(f"cannot read JUnit: {problems[0]}", file=str(junit))
    props = props or {}
    if not props.get("matrix"):
        raise UsageError(
            f"{junit}: no run folder around it and no 'matrix' suite property; "
            "it was not written by a harness run"
        )
    return Recorded(
        run_id=junit.name,
        run_dir=None,
        junit_files=(junit,),
        matrix_name=props["matrix"],
        matrix_hash=props.get("matrix_hash", ""),
        matrix_file=props.get("matrix_file") or None,
        emulate=props.get("emulate") == "true",
        seed=int(props.get("seed") or 0),
    )


def _matrix_file(rec: Recorded, root: Path) -> str | None:
    """The run's matrix file (a custom matrix) when this machine has it as a YAML file
    that is not part of the run folder or artifact itself (which could have shipped it)."""
    file = rec.matrix_file
    if not file:
        return None
    target = (root.resolve() / file).resolve()
    if target.suffix not in (".yaml", ".yml") or not target.is_file():
        return None
    shipped = [rec.run_dir.resolve()] if rec.run_dir else [p.parent.resolve()
                                                            for p in rec.junit_files]
    return None if any(target.is_relative_to(d) for d in shipped) else str(target)


def load_recorded_matrix(rec: Recorded, root: Path, *, trust: bool = False) -> Matrix:
    """The matrix that ran (its matrix.json), checked against this checkout's matrix of
    that name (harness.repro.trust), and shown as a diff when it differs."""
    current: Matrix | None = None
    file = _matrix_file(rec, root)
    try:
        current = load_matrix(file or rec.matrix_name, root=root)
    except HarnessError as error:
        if rec.resolved is None:
            raise
        say(
            f"matrix {rec.matrix_name} does not load from this checkout ({error}); "
            "using the recorded matrix"
        )
    if rec.resolved is not None:
        matrix = load_matrix(rec.resolved, root=root)
        if current is not None and current.hash != matrix.hash:
            say(
                f"matrix {rec.matrix_name} changed since run {rec.run_id} "
                f"(hash {rec.matrix_hash[:12]} -> {current.hash[:12]}); using the recorded matrix"
            )
            for line in matrix_diff(current, matrix):
                print(f"  {line}")
        _refuse_or_accept(matrix_problems(matrix, rec.matrix_hash, current), rec, trust)
        return matrix
    assert current is not None  # without a recorded matrix, a load failure was raised
    if rec.matrix_hash and current.hash != rec.matrix_hash:
        say(
            f"matrix {rec.matrix_name} changed since run {rec.run_id} "
            f"(hash {rec.matrix_hash[:12]} -> {current.hash[:12]}); the JUnit file has no "
            "run folder with the recorded matrix, so using the current one"
        )
    return current


def _refuse_or_accept(problems: list[str], rec: Recorded, trust: bool) -> None:
    if not problems:
        return
    shown = str(rec.resolved)
    if not trust:
        errors = [ConfigError(p, file=shown) for p in problems]
        raise errors[0] if len(errors) == 1 else ConfigErrors(errors)
    for problem in problems:
        say(f"accepted by --trust-run-folder: {problem.split('; refused', 1)[0]}")


def check_checkout(rec: Recorded, root: Path) -> None:
    here = git_info(root)
    if rec.git_sha and here.sha and here.sha != rec.git_sha:
        say(f"checkout is at {here.sha[:12]}, the run was at {rec.git_sha[:12]}")
    if here.dirty:
        say("the checkout has uncommitted changes")
    if rec.git_dirty:
        say(f"run {rec.run_id} ran on a checkout with uncommitted changes")


def restored_env(rec: Recorded, matrix: Matrix, *, trust: bool = False) -> dict[str, str]:
    """The run's seed and thread settings (an allowlist, harness.repro.trust); with
    ``trust``, its whole environment less what names its machine and what was masked."""
    recomputed = (_MACHINE_ENV | set(cache_env(matrix)) | set(matrix.runtime.env)
                  | {"HARNESS_SUITE_PROPERTIES", "TRITON_INTERPRET", "TORCH_LOGS", "COLUMNS"})
    env = {k: v for k, v in rec.env.items() if k not in recomputed}
    if not trust:
        env, dropped = split_env(env, recomputed)
        if dropped:
            say(f"not restored (not seed or thread settings): {', '.join(dropped)} "
                "(--trust-run-folder restores them)")
    masked = sorted(k for k, v in env.items() if v == MASKED)
    if masked:
        say(
            f"not restored (masked in the manifest): {', '.join(masked)}; this shell's values apply"
        )
    return {k: v for k, v in env.items() if v != MASKED}


@dataclass(frozen=True, kw_only=True)
class Choice:
    tests: dict[str, tuple[str, ...]]  # suite -> node ids
    whole: dict[str, str]  # suite -> why all of it runs
    shard: Shard | None = None


def choose(rec: Recorded, matrix: Matrix, root: Path, wanted: list[str]) -> Choice:
    places = suite_places(matrix.suites, root)
    rootdirs = {name: place.rootdir for name, place in places.items()}
    recorded = [read_suite(path, root, rootdirs) for path in rec.junit_files]
    if wanted:
        picked = pick_tests(wanted, recorded, places, root)
        _check_node_ids(picked, root, rootdirs)
        return Choice(tests=picked, whole={})
    tests: dict[str, tuple[str, ...]] = {}
    whole: dict[str, str] = {}
    shards: set[str] = set()
    for suite in recorded:
        if suite.whole:
            whole[suite.suite] = suite.whole
            shards.update([suite.shard] if suite.shard else [])
        elif suite.failed:
            tests[suite.suite] = tests.get(suite.suite, ()) + suite.failed
    seen = {s.suite for s in recorded}
    for name in rec.planned:
        if name not in seen:
            whole[name] = "no JUnit file was written"
    if len(shards) > 1:
        raise UsageError(
            f"more than one shard to rerun whole ({', '.join(sorted(shards))}); "
            "give one shard's JUnit file"
        )
    for name in whole:
        tests.pop(name, None)
    _check_node_ids(tests, root, rootdirs)
    # A whole suite reruns the shard that ran it; node ids are never sharded.
    shard = next(iter(shards), None) or (rec.shard if whole else None)
    return Choice(tests=tests, whole=whole, shard=_shard(shard))


def _shard(text: str | None) -> Shard | None:
    """The recorded shard a whole suite reruns; a run folder's is data, checked here."""
    if not text:
        return None
    try:
        return Shard.parse(text)
    except ValueError as error:
        raise UsageError(f"the run's shard {error}") from None


def _check_node_ids(tests: dict[str, tuple[str, ...]], root: Path,
                    rootdirs: dict[str, Path]) -> None:
    problems = node_id_problems(tests, root, rootdirs)
    if problems:
        raise UsageError("\n".join(problems))


class RunOptions(TypedDict, total=False):
    """What ``harness repro`` passes on to the run as ``harness run`` would."""

    reports: Path | None
    dry_run: bool
    python: str
    keep_container: bool
    command_line: tuple[str, ...]


def build_request(
    rec: Recorded,
    choice: Choice,
    *,
    matrix: Matrix,
    emulate: bool,
    docker: bool | None,
    trust: bool = False,
    **options: Unpack[RunOptions],
) -> RunRequest:
    if docker is None and not emulate and rec.runner:
        docker = rec.runner == "docker"
    if docker and rec.image:
        say(f"run {rec.run_id} used image {rec.image}")
    env = restored_env(rec, matrix, trust=trust)
    _note_threads(rec, env)
    return RunRequest(
        matrix=rec.matrix_name,
        suites=tuple([*choice.tests, *choice.whole]),
        tests=choice.tests,
        emulate=emulate,
        workers=rec.workers,
        docker=docker,
        shard=choice.shard,
        seed=rec.seed,
        platform_file=rec.resolved,
        env=env,
        suite_threads=rec.suite_threads,
        durations_file=_durations(rec) if choice.shard else None,
        repro_of=rec.run_id,
        **options,
    )


def _note_threads(rec: Recorded, env: dict[str, str]) -> None:
    """The run's thread counts are kept (they can change reduction order); say so when
    this machine has fewer CPUs than they assume."""
    cpus = cpu_budget().cpus
    threads = env.get("OMP_NUM_THREADS", "")
    workers = rec.workers or 1
    if threads.isdigit() and workers * int(threads) > cpus:
        say(
            f"the run used {workers} worker(s) x {threads} thread(s); this machine has {cpus} "
            "CPU(s): threads are kept as recorded, workers are capped"
        )


def _durations(rec: Recorded) -> Path | None:
    path = rec.run_dir / layout.DURATIONS if rec.run_dir else None
    return path if path and path.is_file() else None


def describe(rec: Recorded, choice: Choice) -> None:
    for suite, ids in choice.tests.items():
        say(f"{suite}: {len(ids)} test(s) from run {rec.run_id}: {', '.join(ids)}")
    for suite, why in choice.whole.items():
        shard = f" (shard {choice.shard})" if choice.shard else ""
        say(f"{suite}: the whole suite{shard}, since {why}")
