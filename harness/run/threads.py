"""Workers and threads within the host's CPU budget (platform/budget.py).

Oversubscription (xdist workers x OMP threads above the cgroup quota) has caused
2-15x slowdowns in the field, so workers x threads never exceed the budget (the smaller
of the cgroup CPU quota, rounded down, and the affinity mask).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from harness.platform.budget import CpuBudget, MemoryBudget

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclass(frozen=True, kw_only=True)
class ThreadPlan:
    cpus: int
    source: str
    workers: int
    threads_per_worker: int
    user_set: bool  # OMP_NUM_THREADS came from the user and was left alone
    enabled: bool
    memory_mb: float | None = None  # the host's memory budget (platform/budget.py)
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
