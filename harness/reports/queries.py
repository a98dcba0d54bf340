"""The sections that compare runs through time, from the history's rows
(``history/window.py``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from harness.history.window import WindowReader
from harness.reports.model import Change, Flake, InfraEvent, Series, Streak
from harness.results.case_meaning import NEW_FAILURES, WORKS


def changes(
    db: WindowReader, lane: str, before: Sequence[int], after: Sequence[int]
) -> tuple[list[Change], list[Change]]:
    """Latest night against the one before it (each night's runs: one, or its shards);
    infrastructure failures on either side excluded."""

    def outcomes(night: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        return {
            test: (key, status, message or "") for test, key, status, message in db.outcomes(night)
        }

    old_run, new_run = outcomes(before), outcomes(after)
    regressions: list[Change] = []
    fixes: list[Change] = []
    for test, (key, new, message) in sorted(new_run.items(), key=lambda item: item[1][0]):
        if test not in old_run:
            continue
        old = old_run[test][1]
        if old in WORKS and new in NEW_FAILURES:
            regressions.append(Change(lane, key, old, new, message or old_run[test][2]))
        elif old in NEW_FAILURES and new in WORKS:
            fixes.append(Change(lane, key, old, new, ""))
    return regressions, fixes


def streaks(db: WindowReader, lane: str, runs: Sequence[tuple[int, str]]) -> list[Streak]:
    """Tests failing in the latest run and in the runs right before it (2 or more)."""
    if len(runs) < 2:
        return []
    failing: dict[int, dict[int, tuple[str, str]]] = defaultdict(dict)
    for test, run, key, message in db.failing([r for r, _ in runs]):
        failing[test][run] = (key, message)
    latest = runs[-1][0]
    found: list[Streak] = []
    for by_run in failing.values():
        if latest not in by_run:
            continue
        length, since = 0, runs[-1][1]
        for run, started in reversed(runs):
            if run not in by_run:
                break
            length, since = length + 1, started
        if length >= 2:
            key, message = by_run[latest]
            found.append(Streak(lane, key, length, since, message))
    return sorted(found, key=lambda s: (-s.runs, s.key))


def flaky(db: WindowReader, window: Sequence[int]) -> list[Flake]:
    """Pass/fail flips (two or more) or a pass on rerun; infrastructure excluded."""
    rows = db.flaky(window)
    found = [Flake(lane, key, n, bad, flips, reruns) for lane, key, n, bad, flips, reruns in rows]
    return sorted(found, key=lambda f: (-f.flips - f.rerun_passes, f.lane, f.key))


def infra_events(db: WindowReader, window: Sequence[int], limit: int = 200) -> list[InfraEvent]:
    events = [
        InfraEvent(row.lane, row.run_key, row.started, scope, row.name, row.label,
                   row.message or "")
        for scope, row in db.infra(window, limit)
    ]
    return sorted(events, key=lambda e: (e.started, e.lane, e.scope), reverse=True)


def error_trends(db: WindowReader, window: Sequence[int]) -> list[Series]:
    series: dict[tuple[str, str], Series] = {}
    for lane, op, started, headroom in db.op_headroom(window):
        item = series.setdefault((op, lane), Series(op, lane, "", []))
        item.points.append((started, headroom))
    return sorted(series.values(), key=lambda s: (s.label, s.lane))


def pass_rates(db: WindowReader, window: Sequence[int]) -> list[Series]:
    series: dict[str, Series] = {}
    for lane, started, rate in db.pass_rates(window):
        item = series.setdefault(lane, Series("pass rate", lane, "", []))
        item.points.append((started, rate))
    return sorted(series.values(), key=lambda s: s.lane)


def fusion_drift(db: WindowReader, window: Sequence[int]) -> list[Series]:
    found: dict[tuple[str, str, str], Series] = {}
    expected: dict[tuple[str, str, str], float] = {}
    for lane, key, started, name, value in db.fusion_values(window):
        metric, _, kind = str(name).rpartition(".")
        if value is None:
            continue
        try:
            number = float(value)
        except ValueError:
            continue
        ident = (lane, key, metric)
        if kind == "found":
            found.setdefault(ident, Series(metric, lane, key, [])).points.append((started, number))
        elif kind == "expected":
            expected[ident] = number
    for ident, item in found.items():
        item.expected = expected.get(ident)
        values = {value for _, value in item.points}
        latest = item.points[-1][1]
        item.drifted = len(values) > 1 or (item.expected is not None and latest != item.expected)
    return sorted(found.values(), key=lambda s: (not s.drifted, s.label, s.lane, s.key))
