"""What a suite's workers may hold, decided in one place (pure: plugin/memory.py's scheduler
asks it after each test, with what the test reported).

The suite has one budget, ``total_mb`` (the run hands it the host's, platform/budget.py);
each worker's share is that over the workers still running. The last worker left and a
suite's lone worker keep by one rule, :func:`keep_mb`, whose one input is the heaviest
test's growth (how far above where it started a test took its process): the history's, or
the matrix's ``peak_memory_mb`` before there is one, or the largest seen in this run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


def keep_mb(total_mb: float, heaviest_mb: float) -> float:
    """What a suite's last worker (or its lone one) may keep between tests: room beside it
    for the heaviest test, never more than half the budget, at least 1 MB."""
    return max(1.0, min(total_mb / 2, total_mb - heaviest_mb))


@dataclass(frozen=True, kw_only=True)
class Needs:
    """A suite's tests' memory needs as the run hands them (``--harness-test-memory``):
    each test's growth from the history, and the heaviest (the history's, else the
    matrix's ``peak_memory_mb``)."""

    heaviest_mb: float = 0.0
    tests: Mapping[str, float] = field(default_factory=dict)


def read_needs(path: str | None, suite: str) -> Needs:
    """``suite``'s needs from the run's file; none where it has none or cannot be read (a
    schedule without them restarts workers only after the fact)."""
    if not path:
        return Needs()
    try:
        entry = json.loads(Path(path).read_text(encoding="utf-8")).get(suite) or {}
        tests = {str(k): float(v) for k, v in (entry.get("tests") or {}).items()}
        return Needs(heaviest_mb=float(entry.get("heaviest_mb") or 0.0), tests=tests)
    except (OSError, ValueError, TypeError, AttributeError):
        return Needs()


@dataclass(frozen=True, kw_only=True)
class Seen:
    """What one test's teardown report says of its worker (plugin/memory.py TestMemory)."""

    nodeid: str
    rss_mb: float  # what the worker holds now
    peak_mb: float | None = None  # the most it held during the test
    growth_mb: float | None = None  # how far above its start the test took it
    start_mb: float | None = None  # what it held when the test started


@dataclass(frozen=True, kw_only=True)
class Drain:
    """A worker to take out between tests, and whether a fresh one replaces it."""

    why: str
    retire: bool = False  # not replaced: the suite goes on with one worker fewer


class Keeper:
    """The suite's budget over its workers, learning each test's growth as they run."""

    def __init__(self, total_mb: float, needs: Needs) -> None:
        self.total_mb = total_mb
        self.heaviest_mb = needs.heaviest_mb
        self.grew: dict[str, float] = dict(needs.tests)  # test -> its growth
        self.fresh_mb: float | None = None  # what a worker holds before its first test

    def share(self, live: int) -> float:
        """What a worker may keep with ``live`` workers running: the budget over them; the
        last one left (or the only one), :func:`keep_mb`."""
        if live <= 1:
            return keep_mb(self.total_mb, self.heaviest_mb)
        return self.total_mb / live

    def learn(self, seen: Seen) -> None:
        if seen.growth_mb is not None:
            self.heaviest_mb = max(self.heaviest_mb, seen.growth_mb)
            self.grew[seen.nodeid] = max(self.grew.get(seen.nodeid, 0.0), seen.growth_mb)
        if seen.start_mb is not None:
            self.fresh_mb = min(self.fresh_mb or seen.start_mb, seen.start_mb)

    def judge(self, seen: Seen, live: int, queued: Sequence[str] = ()) -> Drain | None:
        """Whether the worker that reported ``seen`` goes: over its share now, a test that
        needed more than a share while it ran, or a test still queued for it (``queued``:
        those it has not started nor holds as next) that would take it over its share
        beside what it holds now (it only holds more by then)."""
        share = self.share(live)
        if seen.rss_mb > share:  # what it kept: a fresh worker starts without it
            return Drain(why=f"{seen.rss_mb:.0f} MB resident after {seen.nodeid}, over the "
                             f"{share:.0f} MB a worker may use")
        if seen.peak_mb is not None and seen.peak_mb > share and live > 1:
            # it let the memory go, but needed it while it ran: so would it again
            return Drain(retire=True, why=(
                f"{seen.nodeid} held {seen.peak_mb:.0f} MB while it ran, over the {share:.0f}"
                f" MB a worker may use: the suite goes on with {live - 1} worker(s)"))
        if live <= 1:  # the last one keeps within keep_mb: any test fits beside it
            return None
        test = next((t for t in queued if t in self.grew and seen.rss_mb + self.grew[t] > share),
                    None)
        if test is None:
            return None
        need = self.grew[test]
        if (self.fresh_mb or 0.0) + need > share:  # a fresh worker could not hold it either
            return Drain(retire=True, why=(
                f"its test {test} needs {need:.0f} MB, more than a fresh worker has room "
                f"for in the {share:.0f} MB a worker may use: the suite goes on with "
                f"{live - 1} worker(s)"))
        return Drain(why=(f"its test {test} needs {need:.0f} MB beside the {seen.rss_mb:.0f} "
                          f"MB it holds, over the {share:.0f} MB a worker may use"))
