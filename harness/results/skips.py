"""How much of a suite skipped, and why: a suite that runs but tests nothing is a state.

Counted over the suite's JUnit test cases: skips (not xfails) against every case,
the harness's own error cases and the tests a stopped suite never ran left out. The
top reasons travel into the manifest's suite row (``skip_ratio``, ``mostly_skipped``,
``skip_reasons``) so the console table and the reports can show why.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from harness.results.junit_expat import collection_skip_reason
from harness.results.junit_write import NOT_RUN_TYPE
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


def summarise_skips(junit: Path, suite: str) -> SkipSummary:
    reasons: Counter[str] = Counter()
    total = 0
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.get("classname") == f"harness.{suite}":
            continue  # "<suite>: crashed: ..." written by the runner, not a test
        skipped = case.find("skipped")
        if skipped is not None and skipped.get("type") == NOT_RUN_TYPE:
            continue  # never ran: the suite stopped first (its crash says so), not a skip
        total += 1
        if skipped is None or skipped.get("type") == "pytest.xfail":
            continue
        reasons[_reason(skipped)] += 1
    return SkipSummary(
        total=total,
        skipped=sum(reasons.values()),
        # most common first, ties by their words: not by the order xdist's workers
        # finished in, so that two runs of the same tests list the same reasons
        reasons=tuple(SkipReason(reason=reason, count=count) for reason, count in
                      sorted(reasons.items(), key=lambda r: (-r[1], r[0]))[:TOP_REASONS]),
    )


def _reason(element: ET.Element) -> str:
    message = (element.get("message") or "").strip()
    collected = collection_skip_reason(message, element.text or "")
    if collected:
        return collected[:200]
    text = message or (element.text or "").strip()
    return text.splitlines()[0][:200] if text else "(no reason given)"
