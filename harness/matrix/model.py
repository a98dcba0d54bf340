"""The parsed matrix: frozen, keyword-only dataclasses whose fields mirror the YAML keys.

Only ``harness.matrix.build`` creates these, from a validated, merged mapping; every
other part of the harness reads them and never sees raw YAML.
"""

from __future__ import annotations

import datetime
import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from harness.errors import UsageError

Family = Literal["cuda", "rocm", "xpu", "cpu"]


@dataclass(frozen=True, kw_only=True)
class CapabilityDef:
    name: str
    parent: str | None = None
    hardware: bool = False  # a property of the physical device or its vendor stack
    emulable: bool = True  # still available when the profile is emulated on the CPU
    description: str = ""


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    platform: str
    catalog: Mapping[str, CapabilityDef]
    provides: frozenset[str]

    def known(self, name: str) -> bool:
        return name in self.catalog

    def _require_known(self, name: str) -> None:
        if name not in self.catalog:
            near = difflib.get_close_matches(name, list(self.catalog), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise UsageError(f"unknown capability {name!r}{hint}")

    def _ancestors(self, name: str) -> list[str]:
        out: list[str] = []
        parent = self.catalog[name].parent if name in self.catalog else None
        while parent is not None and parent not in out:
            out.append(parent)
            parent = self.catalog[parent].parent if parent in self.catalog else None
        return out

    def closure(self, emulate: bool = False) -> frozenset[str]:
        """What the platform has: each provided capability plus all its ancestors."""
        have: set[str] = set()
        for name in self.provides:
            if emulate and not self.catalog[name].emulable:
                continue
            have.add(name)
            have.update(self._ancestors(name))
        return frozenset(have)

    def has(self, name: str, emulate: bool = False) -> bool:
        self._require_known(name)
        return name in self.closure(emulate)

    def why_missing(self, name: str, emulate: bool = False) -> str | None:
        """None when present; else one line saying why (names the platform)."""
        if self.has(name, emulate):
            return None
        if name in self.closure(False):
            entry = self.catalog[name]
            if emulate and (entry.hardware or not entry.emulable):
                what = "needs hardware" if entry.hardware else "cannot be emulated"
                return f"{self.platform}: {name} {what} (emulated on the CPU)"
            # A parent present natively but only through non-emulable children.
            return f"{self.platform}: {name} is not available when emulated on the CPU"
        return f"{self.platform} does not provide {name}"


@dataclass(frozen=True, kw_only=True)
class Tol:
    atol: float
    rtol: float
    bitwise: bool = False


@dataclass(frozen=True, kw_only=True)
class Tolerances:
    by_dtype: Mapping[str, Tol]
    ops: Mapping[str, Mapping[str, Tol]]
    # dtype -> "base" | "platform": which layer set each by_dtype entry.
    origins: Mapping[str, str] = field(default_factory=dict)

    def lookup(self, dtype: str, op: str | None = None) -> tuple[Tol, str]:
        """The most specific tolerance for (dtype, op) and which layer it came from."""
        name = dtype.removeprefix("torch.")
        if op is not None and op in self.ops:
            per_op = self.ops[op]
            for key in (name, "*"):
                if key in per_op:
                    return per_op[key], f"op:{op}"
        if name in self.by_dtype:
            return self.by_dtype[name], self.origins.get(name, "platform")
        raise UsageError(f"no tolerance for dtype {name!r} (known: {', '.join(self.by_dtype)})")


@dataclass(frozen=True, kw_only=True)
class Fp8:
    e4m3: str | None = None
    e5m2: str | None = None


@dataclass(frozen=True, kw_only=True)
class PythonEnv:
    requirements: tuple[str, ...] = ()
    python: str | None = None
    remove: tuple[str, ...] = ()  # uninstalled after the requirements (they break the env)
    sources: tuple[Source, ...] = ()  # pins public PyPI cannot resolve, with where from


@dataclass(frozen=True, kw_only=True)
class Source:
    """A pin the public index cannot resolve (a local version like torch==2.13.0+cpu)."""

    requirement: str
    index: str
    why: str


@dataclass(frozen=True, kw_only=True)
class Download:
    url: str
    sha256: str
    dest: str


@dataclass(frozen=True, kw_only=True)
class Image:
    dockerfile: str | None
    base: str | None
    local_base: str | None = None
    build_args: Mapping[str, str] = field(default_factory=dict)
    downloads: tuple[Download, ...] = ()
    tag_prefix: str = "harness"


@dataclass(frozen=True, kw_only=True)
class Runtime:
    docker: bool = False
    gpus: str | None = None
    devices: tuple[str, ...] = ()
    group_add: tuple[str, ...] = ()
    ipc: str | None = None
    shm_size: str | None = None
    security_opt: tuple[str, ...] = ()
    cap_add: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    env_allowlist: tuple[str, ...] = ()
    network: str = "none"
    cpuset_cpus: str | None = None
    cpuset_mems: str | None = None
    mem_limit: str | None = None
    platform: str | None = None
    step_timeout_s: int = 3600
    test_timeout_s: int = 600
    # Modules one process imports once; each one-worker suite then runs in a process
    # forked from it (runners/forkserver.py): isolation per suite without the import's cost.
    preload: tuple[str, ...] = ()


class ProbeExpect(TypedDict, total=False):
    """What the probe must find (``probe.expect`` in ``schema.py``); each key optional."""

    arch: str
    compute_cap: str
    min_devices: int
    vendor: str
    cpu_flags: list[str]
    byteorder: Literal["little", "big"]
    vendor_library: str
    capabilities: list[str]


@dataclass(frozen=True, kw_only=True)
class Probe:
    kind: str = "none"
    expect: ProbeExpect = field(default_factory=ProbeExpect)


@dataclass(frozen=True, kw_only=True)
class Caches:
    root: str = "~/.cache/harness"
    tiktoken: bool = True
    hf: bool = True
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Suite:
    name: str
    path: str
    workers: int | Literal["auto"] = "auto"
    timeout_s: int = 1800
    markers: str = ""
    k: str = ""
    tier: str = "full"
    enabled: bool = True
    rootdir: str | None = None  # resolved by harness.matrix.suite_paths
    cwd: str | None = None
    pytest_args: tuple[str, ...] = ()
    max_skip_ratio: float = 0.5
    not_applicable: str | None = None  # why it does not apply here: recorded, not run
    peak_memory_mb: float | None = None  # a test's peak until the lane's history has one
    tests_from: str | None = None  # NAME==VERSION | NAME@COMMIT: its tests' engine release
    across_releases: bool = False  # run it where that is not the lane's engine's release


@dataclass(frozen=True, kw_only=True)
class HostCondition:
    """The host a known failure depends on: CPU flags that must be there, or must not."""

    cpu_flags: tuple[str, ...] = ()
    cpu_flags_absent: tuple[str, ...] = ()

    def holds(self, flags: frozenset[str]) -> bool:
        return all(f in flags for f in self.cpu_flags) and not any(
            f in flags for f in self.cpu_flags_absent
        )

    def describe(self) -> str:
        parts = [f"with {', '.join(self.cpu_flags)}"] if self.cpu_flags else []
        if self.cpu_flags_absent:
            parts.append(f"without {', '.join(self.cpu_flags_absent)}")
        return "on a host CPU " + " and ".join(parts)


@dataclass(frozen=True, kw_only=True)
class KnownFailure:
    id: str
    reason: str
    issue: str | None = None
    owner: str | None = None
    expires: datetime.date | None = None
    action: Literal["xfail", "skip", "quarantine"] = "xfail"
    requires: tuple[str, ...] = ()  # applies only where the platform has all of these
    # the failure it expects: raises, match, headroom / max_abs_err {min, max}; a
    # failure outside it fails the run (harness.plugin.failure_expect)
    expect: Mapping[str, object] | None = None
    host: HostCondition | None = None  # applies only on such a host (None: on every host)
    engine_fallback: str = ""  # what the engine itself does when this failure happens in it
    line: int | None = None
    file: str | None = None


@dataclass(frozen=True, kw_only=True)
class Ci:
    queue: str | None = None  # Buildkite agent queue
    runs_on: tuple[str, ...] | None = None  # GitHub labels (None: self-hosted + queue)
    shards: int = 1
    nightly: bool = True
    timeout_minutes: int | None = None  # None: the suites' timeouts plus a margin
    soft_fail: bool = False


# x86-64 psABI levels -> the qemu model that is that level and no more (qemu 7.2 has no
# x86-64-vN model names); x86-64-v4 is AVX-512, which qemu's TCG does not emulate.
CPU_LEVELS = {"x86-64-v2": "Nehalem-v2", "x86-64-v3": "Haswell-v4"}
NO_TCG_LEVELS = {"x86-64-v4": "AVX-512"}


@dataclass(frozen=True, kw_only=True)
class Cpu:
    """The lane's CPU: None for the agent's own, else the CPU qemu-user emulates for every
    process of its suites (platform/cpu_emulation.py)."""

    emulated: str | None = None  # an x86-64 level or a qemu CPU model, as the matrix says

    @property
    def model(self) -> str | None:
        """The qemu CPU model (a level's model for a level)."""
        if self.emulated is None:
            return None
        return CPU_LEVELS.get(self.emulated, self.emulated)

    def describe(self) -> str:
        if self.emulated is None:
            return "the agent's own CPU"
        level = f" ({self.emulated})" if self.emulated in CPU_LEVELS else ""
        return f"an emulated {self.model}{level} (qemu-user)"


@dataclass(frozen=True, kw_only=True)
class Emulation:
    device: str = "cpu"
    note: str = ""
    requirements: tuple[str, ...] = ()  # empty: the matrix's own python.requirements


@dataclass(frozen=True, kw_only=True)
class Matrix:
    name: str
    file: str
    extends: str | None
    description: str
    family: Family
    hardware: str
    device: str
    arch: tuple[str, ...]
    byteorder: Literal["little", "big"]
    capabilities: Capabilities
    dtypes: tuple[str, ...]
    fp8: Fp8
    kernels: Mapping[str, tuple[str, ...]]
    tolerances: Tolerances
    python: PythonEnv
    image: Image
    runtime: Runtime
    probe: Probe
    caches: Caches
    suites: Mapping[str, Suite]
    known_failures: tuple[KnownFailure, ...]
    ci: Ci
    emulation: Emulation
    cpu: Cpu = field(default_factory=Cpu)
    abstract: bool = False
    # the parents whose per-lane files it reads after its own (matrix/loader.py
    # lane_data_chain; empty: its own alone)
    inherits_lane_data: tuple[str, ...] = ()
    # matrix.json's mapping; not Mapping[str, object]: callers read its sections key by
    # key (repro/trust.py), each as the type walk found it
    resolved: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def hash(self) -> str:
        return matrix_hash(self.resolved)

    @property
    def lane_data(self) -> tuple[str, ...]:
        """The lanes whose per-lane files its suites read, its own first."""
        return (self.name, *self.inherits_lane_data)


def canonical_json(data: Mapping[str, object]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def matrix_hash(data: Mapping[str, object]) -> str:
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()
