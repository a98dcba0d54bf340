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
    """The most resident memory a suite's test process held when the lane last ran, or,
    before it ever ran here, what the matrix's ``peak_memory_mb`` says it holds."""

    mb: float
    test: str  # the test it peaked in ("" for the matrix's word)
    recorded: bool = True  # False: the matrix's peak_memory_mb

    def said(self) -> str:
        """Where the figure comes from, for a line that names it."""
        return self.test if self.recorded else "the matrix's peak_memory_mb"


def suite_peaks(recorded: Mapping[str, Peak], declared: Mapping[str, float | None]
                ) -> dict[str, Peak]:
    """Each suite's peak: the history's where it has one, else the matrix's own figure (a
    lane's first run knows its largest test only from the matrix: vLLM's test_cpu_attn.py
    has cases of 14 GB, and two workers of a 24 GB host both in one are killed by the
    kernel before any history exists)."""
    peaks = dict(recorded)
    for suite, mb in declared.items():
        if suite not in peaks and mb:
            peaks[suite] = Peak(mb=float(mb), test="", recorded=False)
    return peaks


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


def lone_keep_mb(budget: MemoryBudget | None, peak: Peak | None) -> float | None:
    """What a suite's one worker may keep between tests, where its heaviest test needs more
    than half the budget; None: it runs without xdist, as any one-worker suite.

    A process that runs a file's cases one after another can keep what they leave (vLLM's
    test_cpu_attn.py's grew to 24 GB on a 24 GB host, each case needing at most 14), and
    without xdist nothing could restart it between tests: such a suite's one worker is
    xdist's, restarted once it keeps more than the budget less that test's peak (the peak
    counts the process's own memory too, so the next such test fits beside what it kept).
    """
    if budget is None or peak is None or peak.mb <= budget.mb / 2:
        return None
    return max(1.0, budget.mb - peak.mb)  # the scheduler's last worker keeps alike


def check_fits(suite: str, budget: MemoryBudget | None, peak: Peak | None) -> None:
    """InfraError (exit 3) where a test of the suite alone needed more than the budget."""
    if budget is None or peak is None or peak.mb <= budget.mb:
        return
    held = (f"{peak.test} held {_size(peak.mb)} resident when this lane last ran"
            if peak.recorded else f"its tests hold up to {_size(peak.mb)} resident (the "
            "matrix's peak_memory_mb)")
    raise InfraError(
        f"suite {suite}: {held}; "
        f"this host's memory budget is {_size(budget.mb)} ({budget.source}): it cannot fit "
        f"here (run it on an agent with more memory, or set {LIMIT_VAR} if the history is "
        "wrong)")


def _size(mb: float) -> str:
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB"


def describe(suite: str, cpu_workers: int, workers: int, budget: MemoryBudget,
             peak: Peak) -> str:
    """The line a suite's memory-limited worker count prints."""
    return (f"suite {suite}: {workers} worker(s), not {cpu_workers}: its tests peaked at "
            f"{_size(peak.mb)} a worker ({peak.said()}), the memory budget is "
            f"{_size(budget.mb)} ({budget.source})")
