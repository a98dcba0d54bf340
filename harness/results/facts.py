"""The machine a run ran on, as the manifest records it: the host, the thread plan and
the device fingerprint. Each reads from and writes to the JSON the manifest has always
held (``to_json`` gives back the same object); a field an older manifest lacks reads as
empty."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field


def _str(data: Mapping[str, object], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def _int(data: Mapping[str, object], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(data: Mapping[str, object], key: str) -> float | None:
    value = data.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _strings(data: Mapping[str, object], key: str) -> list[str]:
    value = data.get(key)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _str_map(data: Mapping[str, object], key: str) -> dict[str, str]:
    value = data.get(key)
    return ({k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}
            if isinstance(value, dict) else {})


@dataclass(frozen=True, kw_only=True)
class HostRecord:
    """The machine the harness ran on (``platform/host.py host_fingerprint``)."""

    machine: str = ""
    system: str = ""
    kernel: str = ""
    hostname: str = ""
    cpu: str = ""
    cpu_vendor: str = ""
    cpu_flags: list[str] = field(default_factory=list)  # those the kernels care about
    cpu_count: int | None = None
    byteorder: str = ""
    python: str = ""
    # The lane's emulated CPU (qemu-user's model), when it has one: then cpu, cpu_vendor
    # and cpu_flags are what CPUID answers inside the emulation, and agent_cpu the agent's.
    cpu_emulated: str = ""
    agent_cpu: str = ""
    # The agent's host-tuned CPU settings (OPENBLAS_CORETYPE=Haswell, ...) that the lane's
    # emulated CPU did not inherit (platform/cpu_tuning.py): name -> the agent's value.
    agent_env_left_out: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> HostRecord:
        return cls(
            machine=_str(data, "machine"), system=_str(data, "system"),
            kernel=_str(data, "kernel"), hostname=_str(data, "hostname"),
            cpu=_str(data, "cpu"), cpu_vendor=_str(data, "cpu_vendor"),
            cpu_flags=_strings(data, "cpu_flags"), cpu_count=_int(data, "cpu_count"),
            byteorder=_str(data, "byteorder"), python=_str(data, "python"),
            cpu_emulated=_str(data, "cpu_emulated"), agent_cpu=_str(data, "agent_cpu"),
            agent_env_left_out=_str_map(data, "agent_env_left_out"),
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ThreadsRecord:
    """How the run split the CPUs (``run/threads.py ThreadPlan``) and the OMP_NUM_THREADS
    its suites saw."""

    cpus: int | None = None
    source: str = ""  # what limited the CPUs: a cgroup quota, the affinity mask
    workers: int | None = None
    threads_per_worker: int | None = None
    user_set: bool = False  # OMP_NUM_THREADS came from the user and was left alone
    enabled: bool = False
    omp_num_threads: int | str | None = None  # the user's text where user_set
    memory_mb: float | None = None  # the memory budget the workers were chosen within
    memory_source: str = ""  # what limited it: HARNESS_MEMORY_LIMIT, a cgroup, MemAvailable

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ThreadsRecord:
        omp = data.get("omp_num_threads")
        return cls(
            cpus=_int(data, "cpus"), source=_str(data, "source"),
            workers=_int(data, "workers"),
            threads_per_worker=_int(data, "threads_per_worker"),
            user_set=data.get("user_set") is True, enabled=data.get("enabled") is True,
            omp_num_threads=omp if isinstance(omp, int | str) and not isinstance(omp, bool)
            else None,
            memory_mb=_number(data, "memory_mb"), memory_source=_str(data, "memory_source"),
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ProbeKind:
    """One kind of device probe (a matrix's ``probe.kind``; how it runs and parses is
    ``platform/probe.py TOOLS``): the words for what it finds, as the doctor's and the
    probe's messages name it, and whether it is a GPU's own tool (a fingerprint of it is
    a GPU's, ``DeviceFingerprint.is_gpu``; the doctor looks for its device)."""

    kind: str
    device: str = "device"
    gpu: bool = False


# Every probe kind, once: the matrix schema's choices (in this order), the probe, the doctor.
PROBE_KINDS: Mapping[str, ProbeKind] = {p.kind: p for p in (
    ProbeKind(kind="nvidia-smi", device="NVIDIA GPU", gpu=True),
    ProbeKind(kind="amd-smi", device="AMD GPU", gpu=True),
    ProbeKind(kind="xpu-smi", device="Intel GPU", gpu=True),
    ProbeKind(kind="lscpu"),
    ProbeKind(kind="s390x"),
    ProbeKind(kind="none"),
)}


def probe_kind(kind: str) -> ProbeKind:
    """The record of ``kind``; one the schema does not know (an old manifest's) is no GPU."""
    return PROBE_KINDS.get(kind) or ProbeKind(kind=kind)


@dataclass(frozen=True)
class DeviceFingerprint:
    """What the device probe found (``platform/probe.py``). Its keys differ by probe kind
    (``nvidia-smi`` lists devices, ``lscpu`` flags), so the JSON object is kept whole and
    the fields every reader uses are typed properties over it."""

    data: Mapping[str, object]

    @property
    def kind(self) -> str:
        return _str(self.data, "kind")

    @property
    def vendor(self) -> str:
        return _str(self.data, "vendor")

    @property
    def model(self) -> str:
        return _str(self.data, "model")

    @property
    def arch(self) -> list[str]:
        return _strings(self.data, "arch")

    @property
    def device_count(self) -> int:
        return _int(self.data, "device_count") or 0

    @property
    def flags(self) -> list[str]:
        return _strings(self.data, "flags")

    @property
    def kernel_library(self) -> str:
        return _str(self.data, "kernel_library")

    @property
    def is_gpu(self) -> bool:
        """Probed by a GPU's own tool (nvidia-smi, amd-smi, xpu-smi): a GPU was there."""
        return probe_kind(self.kind).gpu

    @property
    def engine_ops(self) -> dict[str, str]:
        """The engine's kernel surface on this lane: each op it offered the suites (a
        ``namespace::op`` the engine registered with torch, a refengine ``provider/op``) ->
        where it is defined (plugin/ops.py)."""
        return _str_map(self.data, "engine_ops")

    def with_kernel_library(self, library: str) -> DeviceFingerprint:
        return DeviceFingerprint({**self.data, "kernel_library": library})

    def with_engine_ops(self, ops: Mapping[str, str]) -> DeviceFingerprint:
        return DeviceFingerprint({**self.data, "engine_ops": dict(sorted(ops.items()))})

    def to_json(self) -> dict[str, object]:
        return dict(self.data)

    @classmethod
    def from_json(cls, value: object) -> DeviceFingerprint | None:
        """An object, None, or (schema 1, from a loose JUnit property) a string."""
        if value is None:
            return None
        if isinstance(value, str):
            return cls({"text": value})
        if not isinstance(value, Mapping):
            raise TypeError(f"expected an object, got {type(value).__name__}")
        return cls(dict(value))
