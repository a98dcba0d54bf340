"""Thread budget for CPU platforms.

Oversubscription (xdist workers x OMP threads above the cgroup quota) has caused
2-15x slowdowns in the field, so the budget is the smaller of the cgroup CPU quota
(rounded down) and the affinity mask, and workers x threads never exceed it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.run.memory import MemoryBudget

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclass(frozen=True, kw_only=True)
class CpuBudget:
    cpus: int
    source: str  # what limited it: "cgroup v2 cpu.max", "cgroup v1 cfs quota", "affinity"
    affinity: int
    quota: float | None


@dataclass(frozen=True, kw_only=True)
class ThreadPlan:
    cpus: int
    source: str
    workers: int
    threads_per_worker: int
    user_set: bool  # OMP_NUM_THREADS came from the user and was left alone
    enabled: bool
    memory_mb: float | None = None  # the run's memory budget (run/memory.py)
    memory_source: str = ""

    def env(self) -> dict[str, str]:
        if self.user_set or not self.enabled:
            return {}
        return thread_env(self.threads_per_worker)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def thread_env(threads: int) -> dict[str, str]:
    """The variables that set a test process's thread count (OpenMP, MKL, OpenBLAS, torch's)."""
    return {name: str(threads) for name in THREAD_VARS} | {"HARNESS_TORCH_THREADS": str(threads)}


def read_cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> tuple[float | None, str]:
    """CPUs allowed by the cgroup (v2 cpu.max, else v1 cfs quota); None when unlimited."""
    v2 = root / "cpu.max"
    if v2.is_file():
        quota_text, _, period_text = v2.read_text().strip().partition(" ")
        if quota_text != "max" and period_text:
            return int(quota_text) / int(period_text), "cgroup v2 cpu.max"
        return None, "cgroup v2 cpu.max"
    for folder in (root / "cpu", root / "cpu,cpuacct", root):
        quota_file = folder / "cpu.cfs_quota_us"
        period_file = folder / "cpu.cfs_period_us"
        if quota_file.is_file() and period_file.is_file():
            quota = int(quota_file.read_text().strip())
            if quota > 0:
                return quota / int(period_file.read_text().strip()), "cgroup v1 cfs quota"
            return None, "cgroup v1 cfs quota"
    return None, "none"


def cpu_budget(cgroup_root: Path = Path("/sys/fs/cgroup")) -> CpuBudget:
    affinity = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    quota, quota_source = read_cgroup_quota(cgroup_root)
    if quota is not None and int(quota) < affinity:
        return CpuBudget(
            cpus=max(1, int(quota)), source=quota_source, affinity=affinity, quota=quota
        )
    return CpuBudget(cpus=affinity, source="affinity", affinity=affinity, quota=quota)


def plan_threads(
    requested_workers: int | None,
    budget: CpuBudget,
    environ: Mapping[str, str] = os.environ,
    memory: MemoryBudget | None = None,
) -> ThreadPlan:
    """Workers and threads per worker so that workers x threads <= the CPU budget."""
    enabled = environ.get("HARNESS_THREAD_BUDGET", "on") != "off"
    workers = requested_workers if requested_workers is not None else budget.cpus
    if enabled:
        workers = max(1, min(workers, budget.cpus))
    threads = max(1, budget.cpus // max(1, workers))
    return ThreadPlan(
        cpus=budget.cpus,
        source=budget.source,
        workers=max(1, workers),
        threads_per_worker=threads,
        user_set="OMP_NUM_THREADS" in environ,
        enabled=enabled,
        memory_mb=memory.mb if memory is not None else None,
        memory_source=memory.source if memory is not None else "",
    )
