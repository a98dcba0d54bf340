"""The host's budgets, read once when a run starts: its CPUs (the cgroup's quota and the
affinity mask) and its memory (``HARNESS_MEMORY_LIMIT`` when set, the cgroup's limit less
what it already uses, and the host's available memory: the smallest). Facts of the host, as
the rest of platform/; what a run does within them is the plan's (run/threads.py: workers
and threads; run/memory.py: workers at the suites' recorded peaks) and, inside a suite, the
plugin's (plugin/memory.py: the suite's whole budget and its worker count, handed to it on
pytest's command line, each worker kept within its share).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError

LIMIT_VAR = "HARNESS_MEMORY_LIMIT"
_SIZE = re.compile(r"(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)i?B?", re.I)
_UNIT_MB = {"": 1.0, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024}
_UNLIMITED_V1 = 1 << 60  # cgroup v1 writes a page-rounded 2**63 for "no limit"


@dataclass(frozen=True, kw_only=True)
class MemoryBudget:
    mb: float
    source: str  # what limited it: HARNESS_MEMORY_LIMIT, cgroup v2 memory.max, MemAvailable


@dataclass(frozen=True, kw_only=True)
class CpuBudget:
    cpus: int
    source: str  # what limited it: "cgroup v2 cpu.max", "cgroup v1 cfs quota", "affinity"
    affinity: int
    quota: float | None


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


def parse_size(text: str) -> float:
    """``600M``, ``24G``, ``1.5GiB``, ``2048`` (MB) -> MB; a ValueError for anything else."""
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        raise ValueError(text)
    return float(found["number"]) * _UNIT_MB[found["unit"].upper()]


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_room(root: Path) -> tuple[float, str] | None:
    """What the cgroup still allows, in MB (its limit less its usage); None: no limit."""
    for limit_file, usage_file, source in (
        (root / "memory.max", root / "memory.current", "cgroup v2 memory.max"),
        (root / "memory" / "memory.limit_in_bytes", root / "memory" / "memory.usage_in_bytes",
         "cgroup v1 memory limit"),
    ):
        limit = _read_int(limit_file)
        if limit is not None and limit < _UNLIMITED_V1:
            used = _read_int(usage_file) or 0
            return max(0, limit - used) / (1 << 20), source
    return None


def _available(meminfo: Path) -> float | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_budget(environ: Mapping[str, str] = os.environ,
                  cgroup_root: Path = Path("/sys/fs/cgroup"),
                  meminfo: Path = Path("/proc/meminfo")) -> MemoryBudget | None:
    """The smallest of the memory this run may use; None where nothing says (no /proc)."""
    found: list[tuple[float, str]] = []
    given = environ.get(LIMIT_VAR, "").strip()
    if given:
        try:
            found.append((parse_size(given), LIMIT_VAR))
        except ValueError:
            raise ConfigError(f"{LIMIT_VAR}={given!r}: expected a size such as 600M, 24G or "
                              "2048 (MB)") from None
    room = _cgroup_room(cgroup_root)
    if room is not None:
        found.append(room)
    available = _available(meminfo)
    if available is not None:
        found.append((available, "MemAvailable"))
    if not found:
        return None
    mb, source = min(found)
    return MemoryBudget(mb=round(mb, 1), source=source)
