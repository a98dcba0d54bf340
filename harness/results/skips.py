"""How much of a suite skipped, and why: a suite that runs but tests nothing is a state.

Counted over the suite's JUnit test cases: skips (not xfails) against every case,
the harness's own error cases and the tests a stopped suite never ran left out. The
top reasons travel into the manifest's suite row (``skip_ratio``, ``mostly_skipped``,
``skip_reasons``) so the console table and the reports can show why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from harness.results.junit_read import Case
from harness.results.junit_write import NOT_RUN_WORDS
from harness.results.outcome import SkipReason

TOP_REASONS = 5


@dataclass(frozen=True, kw_only=True)
class SkipSummary:
    total: int
    skipped: int
    reasons: tuple[SkipReason, ...]  # the most common first, at most TOP_REASONS

    @property
    def ratio(self) -> float:
        return self.skipped / self.total if self.total else 0.0

    def mostly_skipped(self, limit: float) -> bool:
        return self.total > 0 and self.ratio > limit


def summarise_skips(cases: Iterable[Case], suite: str) -> SkipSummary:
    """Over a suite's cases as the one JUnit reader reads them (results/suite_junit.py)."""
    reasons: Counter[str] = Counter()
    total = 0
    for case in cases:
        if case.nodeid.startswith(f"harness.{suite}::"):
            continue  # "<suite>: crashed: ..." written by the runner, not a test
        if case.status == "skipped" and case.message.startswith(NOT_RUN_WORDS):
            continue  # never ran: the suite stopped first (its crash says so), not a skip
        total += 1
        if case.status == "skipped":
            reasons[_reason(case.message)] += 1
    return SkipSummary(
        total=total,
        skipped=sum(reasons.values()),
        # most common first, ties by their words: not by the order xdist's workers
        # finished in, so that two runs of the same tests list the same reasons
        reasons=tuple(SkipReason(reason=reason, count=count) for reason, count in
                      sorted(reasons.items(), key=lambda r: (-r[1], r[0]))[:TOP_REASONS]),
    )


def _reason(message: str) -> str:
    """A skip's reason: the first line of its message (a file skipped at collection: the
    reason the reader found for it)."""
    text = message.strip()
    return text.splitlines()[0][:200] if text else "(no reason given)"
