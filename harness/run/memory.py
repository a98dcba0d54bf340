"""How many workers a suite gets within the host's memory budget (platform/budget.py).

A suite's workers are as many as the CPU budget allows *and* as fit in the memory budget at
what a worker needs: where the history has each test's growth, a fresh worker's resident
memory and its heaviest test's growth (what the plugin keeps each worker to: it restarts a
worker before a test that would take it past its share), else the peak a test process
reached when the lane last ran (the history's ``peak_rss_mb``, plugin/memory.py: what one
worker kept over the tests it ran included), or the matrix's ``peak_memory_mb`` before any
history. Each suite is handed the
whole budget and its worker count (``--harness-memory-mb``, ``-n``), and the plugin keeps
each worker within its share (plugin/memory.py); a suite whose test may take its one
process past half the budget gets an xdist worker all the same, so that it can be
restarted between tests. A suite whose test peaked above the whole budget cannot fit here:
one infrastructure line before anything runs, not an OOM kill half an hour in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from harness.errors import InfraError
from harness.platform.budget import LIMIT_VAR, MemoryBudget


@dataclass(frozen=True, kw_only=True)
class Peak:
    """The most resident memory a suite's test process held when the lane last ran, or,
    before it ever ran here, what the matrix's ``peak_memory_mb`` says it holds."""

    mb: float
    test: str  # the test it peaked in ("" for the matrix's word)
    recorded: bool = True  # False: the matrix's peak_memory_mb
    # a fresh worker's resident memory and the heaviest test's growth (the history's), where
    # known: what one worker needs when it is restarted before a test that would not fit
    fresh_mb: float | None = None
    heaviest_mb: float | None = None

    @property
    def worker_mb(self) -> float:
        """What a worker needs: a fresh one and the heaviest test, where the history knows
        both (never more than the peak: that test ran beside what its process held), else
        the peak."""
        if self.fresh_mb is None or self.heaviest_mb is None:
            return self.mb
        return min(self.mb, self.fresh_mb + self.heaviest_mb)

    def said(self) -> str:
        """Where the figure comes from, for a line that names it."""
        if self.worker_mb < self.mb:
            return (f"a fresh worker's {_size(self.fresh_mb or 0.0)} and its heaviest test's "
                    f"growth, {_size(self.heaviest_mb or 0.0)}, in this lane's history")
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


def workers_within(cpu_workers: int, budget: MemoryBudget | None, peak: Peak | None) -> int:
    """The CPU budget's workers, fewer where the recorded peak a worker needs says so."""
    if budget is None or peak is None or peak.worker_mb <= 0:
        return cpu_workers
    return max(1, min(cpu_workers, math.floor(budget.mb / peak.worker_mb)))


def lone_needs_xdist(budget: MemoryBudget | None, peak: Peak | None) -> bool:
    """Whether a suite planned with one worker runs it under xdist all the same: where its
    heaviest test took its process past half the budget. A process that runs a file's cases
    one after another can keep what they leave (vLLM's test_cpu_attn.py's grew to 24 GB on
    a 24 GB host, each case needing at most 14), and without xdist nothing could restart it
    between tests; what it may keep is the plugin's one rule (plugin/memory.py keep_mb)."""
    return budget is not None and peak is not None and peak.mb > budget.mb / 2


def check_fits(suite: str, budget: MemoryBudget | None, peak: Peak | None) -> None:
    """InfraError (exit 3) where a test of the suite alone needed more than the budget."""
    if budget is None or peak is None or peak.worker_mb <= budget.mb:
        return
    if peak.worker_mb < peak.mb:  # restarted before it, a worker still cannot hold it
        held = f"a worker needs {_size(peak.worker_mb)} ({peak.said()})"
    elif peak.recorded:
        held = f"{peak.test} held {_size(peak.mb)} resident when this lane last ran"
    else:
        held = f"its tests hold up to {_size(peak.mb)} resident (the matrix's peak_memory_mb)"
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
    needs = ("a worker needs" if peak.worker_mb < peak.mb else "its tests peaked at")
    return (f"suite {suite}: {workers} worker(s), not {cpu_workers}: {needs} "
            f"{_size(peak.worker_mb)} a worker ({peak.said()}), the memory budget is "
            f"{_size(budget.mb)} ({budget.source})")
