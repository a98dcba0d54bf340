"""The run's memory budget, and how many workers a suite gets within it.

CPUs are budgeted from the cgroup quota (run/threads.py); memory the same way: the budget is
the smallest of ``HARNESS_MEMORY_LIMIT`` (when set), the cgroup's limit less what it already
uses, and the host's available memory, read once when the run starts. A suite's workers are
then as many as the CPU budget allows *and* as fit in the memory budget at the peak its
tests reached when the lane last ran (the history's ``peak_rss_mb``, plugin/memory.py), and
each worker is restarted between tests once it holds more than its share. A suite whose
test peaked above the whole budget cannot fit here: one infrastructure line before anything
runs, not an OOM kill half an hour in.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError, InfraError

LIMIT_VAR = "HARNESS_MEMORY_LIMIT"
_SIZE = re.compile(r"(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)i?B?", re.I)
_UNIT_MB = {"": 1.0, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024}
_UNLIMITED_V1 = 1 << 60  # cgroup v1 writes a page-rounded 2**63 for "no limit"


@dataclass(frozen=True, kw_only=True)
class MemoryBudget:
    mb: float
    source: str  # what limited it: HARNESS_MEMORY_LIMIT, cgroup v2 memory.max, MemAvailable


@dataclass(frozen=True, kw_only=True)
class Peak:
    """The most resident memory a suite's test process held, when the lane last ran."""

    mb: float
    test: str  # the test it peaked in


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


def workers_within(cpu_workers: int, budget: MemoryBudget | None, peak: Peak | None) -> int:
    """The CPU budget's workers, fewer where the recorded peak a worker needs says so."""
    if budget is None or peak is None or peak.mb <= 0:
        return cpu_workers
    return max(1, min(cpu_workers, math.floor(budget.mb / peak.mb)))


def check_fits(suite: str, budget: MemoryBudget | None, peak: Peak | None) -> None:
    """InfraError (exit 3) where a test of the suite alone needed more than the budget."""
    if budget is None or peak is None or peak.mb <= budget.mb:
        return
    raise InfraError(
        f"suite {suite}: {peak.test} held {_size(peak.mb)} resident when this lane last ran; "
        f"this host's memory budget is {_size(budget.mb)} ({budget.source}): it cannot fit "
        f"here (run it on an agent with more memory, or set {LIMIT_VAR} if the history is "
        "wrong)")


def _size(mb: float) -> str:
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB"


def describe(suite: str, cpu_workers: int, workers: int, budget: MemoryBudget,
             peak: Peak) -> str:
    """The line a suite's memory-limited worker count prints."""
    return (f"suite {suite}: {workers} worker(s), not {cpu_workers}: its tests peaked at "
            f"{_size(peak.mb)} a worker ({peak.test}), the memory budget is "
            f"{_size(budget.mb)} ({budget.source})")
