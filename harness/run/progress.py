"""Lines a person can follow during a run: suite i of N, counts so far, time left.

Estimates come from the history's suite durations for this lane (the median of its
last runs) when a history database exists, else from the last run folder of this
matrix under reports/; with neither, no estimate is printed. Reading them never fails a
run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.errors import HarnessError
from harness.history.read import recent_suite_times
from harness.results.layout import Lane
from harness.results.manifest import RunRecord


def history_estimates(db: Path, lane: Lane) -> dict[str, float]:
    """Each suite's median over its last five finished runs on this lane."""
    per: dict[str, list[float]] = {}
    for row in recent_suite_times(db, lane):
        if len(per.setdefault(row.suite, [])) < 5:
            per[row.suite].append(row.seconds)
    return {name: statistics.median(v) for name, v in per.items()}


def folder_estimates(matrix_reports: Path, emulate: bool) -> dict[str, float]:
    """Suite durations from the newest earlier run folder of this matrix (same emulation)."""
    if not matrix_reports.is_dir():
        return {}
    found: dict[str, float] = {}
    for folder in sorted(matrix_reports.iterdir(), reverse=True)[:20]:
        try:
            record = RunRecord.read(folder)
        except HarnessError:  # not a run folder, or a damaged one: no estimate from it
            continue
        if record.emulate != emulate:
            continue
        for suite in record.suites:
            found.setdefault(suite.suite, suite.duration_s)
    return found


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """Prints one line as each suite starts and one as it ends."""

    def __init__(self, suites: Sequence[str], estimates: Mapping[str, float]) -> None:
        self.suites = list(suites)
        self.estimates = dict(estimates)
        self.totals: dict[str, int] = {}
        self.started = time.monotonic()
        self.done: list[str] = []

    def _left(self, after: int) -> float | None:
        rest = self.suites[after:]
        if not rest or any(s not in self.estimates for s in rest):
            return None
        return sum(self.estimates[s] for s in rest)

    def start(self, index: int, suite: str) -> None:
        est = self.estimates.get(suite)
        left = self._left(index)
        parts = [f"suite {index + 1} of {len(self.suites)}: {suite}"]
        if est is not None:
            parts.append(f"took {_clock(est)} last time")
        if left is not None:
            parts.append(f"about {_clock(left)} left in all")
        _emit(parts)

    def end(self, index: int, suite: str, status: str, counts: Mapping[str, int]) -> None:
        for key, value in counts.items():
            if isinstance(value, int):
                self.totals[key] = self.totals.get(key, 0) + value
        keys = ["passed", "failed", *(["error"] if self.totals.get("error") else []), "skipped"]
        shown = ", ".join(f"{self.totals.get(k, 0)} {k}" for k in keys)
        left = self._left(index + 1)
        parts = [
            f"suite {index + 1} of {len(self.suites)} {suite}: {status}",
            f"so far {shown}",
            f"{_clock(time.monotonic() - self.started)} elapsed",
        ]
        if left is not None and left > 0:
            parts.append(f"about {_clock(left)} left")
        _emit(parts)


def _emit(parts: Sequence[str], width: int = 80) -> None:
    """Print ``harness: a; b; c``, starting a new indented line rather than pass ``width``."""
    lines = ["harness: " + parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += "; " + part
        else:
            lines[-1] += ";"
            lines.append("harness:   " + part)
    print("\n".join(lines), flush=True)
