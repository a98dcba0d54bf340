"""SQL over the history for the sections that compare runs through time."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence

from harness.reports.model import Change, Flake, InfraEvent, Series, Streak

BAD = ("failed", "error")
GOOD = ("passed", "xpass")


def ids(values: Iterable[int]) -> str:
    """An ``IN (...)`` list of integer row ids (integers only, so nothing to escape)."""
    text = ",".join(str(int(v)) for v in values)
    return text or "NULL"


def changes(
    db: sqlite3.Connection, lane: str, before: Sequence[int], after: Sequence[int]
) -> tuple[list[Change], list[Change]]:
    """Latest night against the one before it (each night's runs: one, or its shards);
    infrastructure failures on either side excluded."""

    def outcomes(night: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        return {
            test: (key, status, message or "")
            for test, key, status, message in db.execute(
                "SELECT c.test, t.key, c.status, c.message FROM cases c"
                f" JOIN tests t ON t.id = c.test WHERE c.run IN ({ids(night)})"
                " AND c.infra_signature IS NULL"
            )
        }

    old_run, new_run = outcomes(before), outcomes(after)
    regressions: list[Change] = []
    fixes: list[Change] = []
    for test, (key, new, message) in sorted(new_run.items(), key=lambda item: item[1][0]):
        if test not in old_run:
            continue
        old = old_run[test][1]
        if old in GOOD and new in BAD:
            regressions.append(Change(lane, key, old, new, message or old_run[test][2]))
        elif old in BAD and new in GOOD:
            fixes.append(Change(lane, key, old, new, ""))
    return regressions, fixes


def streaks(db: sqlite3.Connection, lane: str, runs: Sequence[tuple[int, str]]) -> list[Streak]:
    """Tests failing in the latest run and in the runs right before it (2 or more)."""
    if len(runs) < 2:
        return []
    failing: dict[int, dict[int, tuple[str, str]]] = defaultdict(dict)
    rows = db.execute(
        "SELECT c.test, c.run, t.key, coalesce(c.message, '') FROM cases c"
        " JOIN tests t ON t.id = c.test"
        f" WHERE c.run IN ({ids(r for r, _ in runs)}) AND c.status IN ('failed', 'error')"
        " AND c.infra_signature IS NULL"
    )
    for test, run, key, message in rows:
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


def flaky(db: sqlite3.Connection, window: Sequence[int]) -> list[Flake]:
    """Pass/fail flips (two or more) or a pass on rerun; infrastructure excluded."""
    rows = db.execute(
        f"""
        WITH seq AS (
            SELECT r.lane AS lane, c.test AS test, r.started AS started,
                   c.status IN ('failed', 'error') AS bad,
                   (c.reruns > 0 AND c.status IN ('passed', 'xpass')) AS rerun_pass
            FROM cases c JOIN runs r ON r.id = c.run JOIN suites s ON s.id = c.suite
            WHERE c.run IN ({ids(window)}) AND r.infra_signature IS NULL
              AND s.infra_signature IS NULL AND c.infra_signature IS NULL
              AND c.status IN ('passed', 'xpass', 'failed', 'error')
              -- Only tests that failed or were rerun at least once can be flaky.
              AND c.test IN (SELECT test FROM cases WHERE run IN ({ids(window)})
                             AND (status IN ('failed', 'error') OR reruns > 0))
        ), marked AS (
            SELECT lane, test, bad, rerun_pass,
                   bad != LAG(bad) OVER (PARTITION BY lane, test ORDER BY started) AS flip
            FROM seq
        )
        SELECT m.lane, t.key, count(*), sum(m.bad), sum(coalesce(m.flip, 0)), sum(m.rerun_pass)
        FROM marked m JOIN tests t ON t.id = m.test
        GROUP BY m.lane, m.test
        HAVING sum(m.rerun_pass) > 0 OR sum(coalesce(m.flip, 0)) >= 2
        """
    )
    found = [Flake(lane, key, n, bad, flips, reruns) for lane, key, n, bad, flips, reruns in rows]
    return sorted(found, key=lambda f: (-f.flips - f.rerun_passes, f.lane, f.key))


def infra_events(
    db: sqlite3.Connection, window: Sequence[int], limit: int = 200
) -> list[InfraEvent]:
    scope = f"IN ({ids(window)})"
    events = [
        InfraEvent(lane, key, started, "run", matrix, sig, message or "")
        for lane, key, started, matrix, sig, message in db.execute(
            "SELECT lane, run_key, started, matrix, infra_signature, infra_message FROM runs"
            f" WHERE id {scope} AND infra_signature IS NOT NULL"
        )
    ]
    events += [
        InfraEvent(lane, key, started, "suite", name, sig, reason or "")
        for lane, key, started, name, sig, reason in db.execute(
            "SELECT r.lane, r.run_key, r.started, s.name, s.infra_signature, s.reason"
            f" FROM suites s JOIN runs r ON r.id = s.run WHERE s.run {scope}"
            " AND s.infra_signature IS NOT NULL"
        )
    ]
    events += [
        InfraEvent(lane, key, started, "case", test, sig, message or "")
        for lane, key, started, test, sig, message in db.execute(
            "SELECT r.lane, r.run_key, r.started, t.key, c.infra_signature, c.message"
            " FROM cases c JOIN runs r ON r.id = c.run JOIN tests t ON t.id = c.test"
            f" WHERE c.run {scope} AND c.infra_signature IS NOT NULL"
            " ORDER BY r.started DESC LIMIT ?",
            (limit,),
        )
    ]
    return sorted(events, key=lambda e: (e.started, e.lane, e.scope), reverse=True)


def error_trends(db: sqlite3.Connection, window: Sequence[int]) -> list[Series]:
    series: dict[tuple[str, str], Series] = {}
    for lane, op, started, headroom in db.execute(
        "SELECT r.lane, c.op, r.started, max(c.headroom) FROM cases c"
        f" JOIN runs r ON r.id = c.run WHERE c.run IN ({ids(window)})"
        " AND c.op IS NOT NULL AND c.headroom IS NOT NULL"
        " GROUP BY c.run, c.op ORDER BY r.started"
    ):
        item = series.setdefault((op, lane), Series(op, lane, "", []))
        item.points.append((started, float(headroom)))
    return sorted(series.values(), key=lambda s: (s.label, s.lane))


def pass_rates(db: sqlite3.Connection, window: Sequence[int]) -> list[Series]:
    series: dict[str, Series] = {}
    for lane, started, good, bad in db.execute(
        "SELECT r.lane, r.started, sum(c.status IN ('passed', 'xpass')),"
        " sum(c.status IN ('failed', 'error')) FROM runs r LEFT JOIN cases c ON c.run = r.id"
        f" WHERE r.id IN ({ids(window)}) GROUP BY r.id ORDER BY r.started"
    ):
        total = (good or 0) + (bad or 0)
        item = series.setdefault(lane, Series("pass rate", lane, "", []))
        item.points.append((started, (good or 0) / total if total else 0.0))
    return sorted(series.values(), key=lambda s: s.lane)


def fusion_drift(db: sqlite3.Connection, window: Sequence[int]) -> list[Series]:
    found: dict[tuple[str, str, str], Series] = {}
    expected: dict[tuple[str, str, str], float] = {}
    for lane, key, started, name, value in db.execute(
        "SELECT r.lane, t.key, r.started, j.key, j.value"
        " FROM cases c JOIN runs r ON r.id = c.run JOIN tests t ON t.id = c.test,"
        " json_each(c.extra) j"
        f" WHERE c.run IN ({ids(window)}) AND c.extra LIKE '%fusion.%'"
        " AND j.key LIKE 'fusion.%' ORDER BY r.started"
    ):
        metric, _, kind = str(name).rpartition(".")
        try:
            number = float(value)
        except (TypeError, ValueError):
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
