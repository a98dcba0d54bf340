"""One suite's JUnit file read once, when its process has ended (runners/local.py
``outcome_of``): its cases by outcome, how much of it skipped and why, and the most memory
one of its test processes held, from one pass of the one JUnit reader with the sidecar
joined (the node ids and the properties the plugin recorded)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from harness.results.junit_read import Case, JunitReader, Warn
from harness.results.outcome import count_key
from harness.results.sidecar import PEAK_RSS_PROPERTY
from harness.results.skips import SkipSummary, summarise_skips


@dataclass(frozen=True, kw_only=True)
class SuiteJunit:
    counts: dict[str, int]  # by outcome (xfailed / xpassed apart from skipped)
    skips: SkipSummary
    peak: tuple[float, str] | None  # the highest peak_rss_mb of its tests, and the test


def _quiet(line: str) -> None:
    """A damaged file still counts the cases before the damage."""


def read_suite(junit: Path, suite: str, warn: Warn = _quiet) -> SuiteJunit:
    """``junit``'s cases once, in order, into what the suite's outcome says of them."""
    cases: list[Case] = []
    counts: Counter[str] = Counter()
    peak: tuple[float, str] | None = None
    for case in JunitReader(junit, warn):
        cases.append(case)
        counts[count_key(case.status)] += 1
        mb = _mb(case.properties.get(PEAK_RSS_PROPERTY))
        if mb is not None and (peak is None or mb > peak[0]):
            peak = (mb, case.nodeid)
    return SuiteJunit(counts=dict(counts), skips=summarise_skips(cases, suite), peak=peak)


def _mb(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
