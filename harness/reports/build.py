"""Build the report model from the history database (SQL in, plain data out)."""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from harness.history.schema import connect
from harness.reports import queries
from harness.reports.ids import shorten
from harness.reports.matrices import (
    MatrixFacts,
    facts_from_json,
    facts_from_matrix,
    load_declared,
)
from harness.reports.model import (
    MISSING,
    NEVER_RAN,
    SKIPPING,
    CapabilityRow,
    Change,
    HeadroomRow,
    InfraEvent,
    KnownFailureRow,
    Lane,
    Report,
    SkipChange,
    Streak,
    SuiteCell,
    TestRow,
    Tonight,
)
from harness.results import layout

HEADROOM_LIMIT = 0.8
EXPIRY_DAYS = 14
_STATUS_RANK = {"error": 0, "failed": 1, "xpass": 2, "skipped": 3, "xfail": 4, "passed": 5}
_SPLIT = re.compile(r"[,\s]+")


def _iso(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Runs:
    """The runs in the window, grouped by lane into nights, oldest first.

    A night is one run, or the shards of one CI build (same ``build``, shards ``i/N``
    with distinct ``i``): ``by_lane`` names each night by its first run, ``members``
    lists all of its runs.
    """

    def __init__(self, db: sqlite3.Connection, since: str, until: str) -> None:
        self.start, self.until = since, until
        self.by_lane: dict[str, list[tuple[int, str]]] = defaultdict(list)
        self.rows: dict[int, tuple[str, str, str, str | None, str | None, str | None]] = {}
        self.members: dict[int, list[int]] = {}
        shards: dict[int, tuple[str, str, set[str]]] = {}  # night -> (build, N, indexes)
        for rid, key, lane, matrix, started, status, sig, mjson, shard, build in db.execute(
            "SELECT id, run_key, lane, matrix, started, status, infra_signature, matrix_json,"
            " shard, build FROM runs WHERE started >= ? AND started <= ? ORDER BY started, id",
            (since, until),
        ):
            self.rows[rid] = (key, lane, matrix, status, sig, mjson)
            index, _, total = (shard or "").partition("/")
            nights = self.by_lane[lane]
            night = nights[-1][0] if nights else None
            joined = night is not None and night in shards and build and shards[night][:2] == (
                build, total) and index not in shards[night][2]
            if joined and night is not None:
                shards[night][2].add(index)
                self.members[night].append(rid)
                continue
            nights.append((rid, started))
            self.members[rid] = [rid]
            if build and total:
                shards[rid] = (build, total, {index})

    @property
    def ids(self) -> list[int]:
        return list(self.rows)

    def latest_map(self, lanes: list[str]) -> dict[int, str]:
        """Every run of each lane's latest night -> lane."""
        return {
            member: lane
            for lane in lanes
            if (nights := self.by_lane.get(lane))
            for member in self.members[nights[-1][0]]
        }

    def latest(self, lane: str) -> int | None:
        nights = self.by_lane.get(lane)
        return nights[-1][0] if nights else None

    def night(self, rid: int) -> list[int]:
        return self.members.get(rid, [rid])


def _lane_facts(
    runs: _Runs, declared: dict[str, MatrixFacts], warn: Callable[[str], None]
) -> dict[str, MatrixFacts]:
    facts: dict[str, MatrixFacts] = {}
    for lane, lane_runs in runs.by_lane.items():
        key, _, matrix, _, _, mjson = runs.rows[lane_runs[-1][0]]
        emulate = layout.lane_matrix(lane)[1]
        shown = f"matrix.json of run {key}"
        found = facts_from_json(mjson, shown, warn, emulate=emulate) if mjson else None
        if found is not None:
            facts[lane] = found
        elif matrix in declared:
            item = declared[matrix]
            facts[lane] = facts_from_matrix(item.matrix, emulate=emulate) if item.matrix else item
    for name, item in declared.items():
        if name not in runs.by_lane:  # declared but never ran in the window: a gap
            facts.setdefault(name, item)
    return facts


MOSTLY_SKIPPED_RATIO = 0.5  # the fallback until the run records its own verdict
_MOSTLY = ("mostly-skipped", "mostly_skipped")


def _suite_cells(
    db: sqlite3.Connection, run_lane: dict[int, str]
) -> dict[tuple[str, str], SuiteCell]:
    """The suites that ran in the given runs, with their counts and state."""
    seen: dict[tuple[str, str], SuiteCell] = {}
    verdict: dict[tuple[str, str], bool] = {}
    for run, name, status, sig, reason, case_status, count, duration in db.execute(
        "SELECT s.run, s.name, s.status, s.infra_signature, s.reason, c.status, count(c.status),"
        " coalesce(sum(c.duration), 0) FROM suites s"
        " LEFT JOIN cases c ON c.run = s.run AND c.suite = s.id"
        f" WHERE s.run IN ({queries.ids(run_lane)}) GROUP BY s.id, c.status"
    ):
        lane = run_lane[run]
        cell = seen.get((lane, name))
        if cell is None:
            state = "infra" if sig else "passed"
            text = f"{sig}: {reason}" if sig and reason else (sig or reason or status or "")
            cell = seen[(lane, name)] = SuiteCell(lane, name, state, {}, 0.0, text)
            verdict[(lane, name)] = status in _MOSTLY
        if case_status:
            cell.counts[case_status] = cell.counts.get(case_status, 0) + int(count)
            cell.duration_s += float(duration)
    for ident, cell in seen.items():
        total, skipped = cell.total, cell.counts.get("skipped", 0)
        if cell.state == "infra":
            continue
        if cell.counts.get("failed", 0) + cell.counts.get("error", 0):
            cell.state = "failed"
        elif total == 0:
            cell.state, cell.reason = "empty", cell.reason or "no test cases"
        elif skipped == total:
            cell.state = "all-skipped"
        elif verdict[ident]:
            cell.state = "mostly-skipped"
        elif skipped / total > MOSTLY_SKIPPED_RATIO:
            cell.state = "mostly-skipped"
            cell.reason = cell.reason or f"{skipped} of {total} skipped (over half)"
    return seen


def _suite_grid(
    db: sqlite3.Connection, runs: _Runs, lanes: list[str], facts: dict[str, MatrixFacts]
) -> tuple[list[str], list[SuiteCell]]:
    seen = _suite_cells(db, runs.latest_map(lanes))
    names = {name for _, name in seen}
    for item in facts.values():
        names.update(item.suites)
    suites = sorted(names)
    cells: list[SuiteCell] = []
    for lane in lanes:
        declared = facts[lane].suites if lane in facts else []
        for name in suites:
            cell = seen.get((lane, name))
            if cell is not None:
                cells.append(cell)
            elif name in declared:
                why = (
                    "declared; no run in the window"
                    if runs.latest(lane) is None
                    else "declared; did not run in the latest run"
                )
                cells.append(SuiteCell(lane, name, "absent", {}, 0.0, why))
            else:
                cells.append(SuiteCell(lane, name, "undeclared", {}, 0.0, "not in the matrix"))
    return suites, cells


def _skipping(
    db: sqlite3.Connection, runs: _Runs, lanes: list[str], grid: list[SuiteCell]
) -> list[SkipChange]:
    previous = {
        member: lane
        for lane in lanes
        if len(lane_runs := runs.by_lane.get(lane, [])) >= 2
        for member in runs.night(lane_runs[-2][0])
    }
    before = _suite_cells(db, previous)
    had_before = set(previous.values())
    return [
        SkipChange(
            cell.lane,
            cell.suite,
            cell.state,
            cell.counts.get("skipped", 0),
            cell.total,
            (old.state if (old := before.get((cell.lane, cell.suite))) else "absent")
            if cell.lane in had_before
            else None,
            cell.reason,
        )
        for cell in grid
        if cell.state in SKIPPING
    ]


def _new_infra(runs: _Runs, lanes: list[str], events: list[InfraEvent]) -> list[InfraEvent]:
    """Infrastructure failures of each lane's latest night that the night before lacked."""

    def keys(rid: int) -> set[str]:
        return {runs.rows[member][0] for member in runs.night(rid)}

    latest: dict[str, set[str]] = {}
    previous: dict[str, set[str]] = {}
    for lane in lanes:
        nights = runs.by_lane.get(lane, [])
        if nights:
            latest[lane] = keys(nights[-1][0])
        if len(nights) >= 2:
            previous[lane] = keys(nights[-2][0])
    seen_before = {
        (e.lane, e.scope, e.name, e.signature)
        for e in events
        if e.run in previous.get(e.lane, set())
    }
    return [
        e
        for e in events
        if e.run in latest.get(e.lane, set())
        and (e.lane, e.scope, e.name, e.signature) not in seen_before
    ]


def _test_grid(db: sqlite3.Connection, runs: _Runs, lanes: list[str]) -> list[TestRow]:
    seen: dict[str, set[str]] = defaultdict(set)
    for lane, key in db.execute(
        "SELECT DISTINCT r.lane, t.key FROM cases c JOIN runs r ON r.id = c.run"
        f" JOIN tests t ON t.id = c.test WHERE c.run IN ({queries.ids(runs.ids)})"
    ):
        seen[key].add(lane)
    latest = runs.latest_map(lanes)
    rows = {key: TestRow(key, {}) for key in seen}
    for run, key, status, message in db.execute(
        "SELECT c.run, t.key, c.status, c.message FROM cases c JOIN tests t ON t.id = c.test"
        f" WHERE c.run IN ({queries.ids(latest)})"
    ):
        row, lane = rows[key], latest[run]
        old = row.cells.get(lane)
        if old is None or _STATUS_RANK[status] < _STATUS_RANK[old]:
            row.cells[lane] = status
            if message and status != "passed":
                row.notes[lane] = message.split("\n", 1)[0][:300]
    for key, row in rows.items():
        for lane in lanes:
            if lane not in row.cells:
                row.cells[lane] = MISSING if lane in seen[key] else NEVER_RAN

    def order(row: TestRow) -> tuple[int, str]:
        return (min(_STATUS_RANK.get(s, 3) for s in row.cells.values()), row.key)

    for key, short in shorten(rows).items():
        rows[key].short = short
    return sorted(rows.values(), key=order)


def _capabilities(
    db: sqlite3.Connection, runs: _Runs, lanes: list[str], facts: dict[str, MatrixFacts]
) -> tuple[list[CapabilityRow], list[tuple[str, str]]]:
    exercised: dict[tuple[str, str], set[int]] = defaultdict(set)
    for lane, test, requires in db.execute(
        "SELECT DISTINCT r.lane, c.test, c.requires FROM cases c JOIN runs r ON r.id = c.run"
        f" WHERE c.run IN ({queries.ids(runs.ids)}) AND c.requires IS NOT NULL"
        " AND c.status NOT IN ('skipped')"
    ):
        item = facts.get(lane)
        for cap in filter(None, _SPLIT.split(requires)):
            for name in [cap, *(item.ancestors(cap) if item else [])]:
                exercised[(lane, name)].add(test)
    catalog: dict[str, tuple[str | None, bool]] = {}
    for item in facts.values():
        catalog.update(item.catalog)
    closures = {lane: facts[lane].closure() if lane in facts else set() for lane in lanes}
    rows: list[CapabilityRow] = []
    uncovered: list[tuple[str, str]] = []
    for name in sorted(catalog):
        parent, hardware = catalog[name]
        row = CapabilityRow(name, parent, hardware, {}, {})
        for lane in lanes:
            row.provided[lane] = name in closures[lane]
            row.tests[lane] = len(exercised.get((lane, name), ()))
            if row.provided[lane] and row.tests[lane] == 0:
                uncovered.append((lane, name))
        rows.append(row)
    return rows, uncovered


def _headroom(
    db: sqlite3.Connection, latest: dict[int, str], limit: int = 500
) -> list[HeadroomRow]:
    return [
        HeadroomRow(latest[run], key, op or "", dtype or "", provider or "", float(head), err, atol)
        for run, key, op, dtype, provider, head, err, atol in db.execute(
            "SELECT c.run, t.key, c.op, c.dtype, c.provider, c.headroom, c.max_abs_err, c.atol"
            f" FROM cases c JOIN tests t ON t.id = c.test WHERE c.run IN ({queries.ids(latest)})"
            " AND c.headroom >= ? ORDER BY c.headroom DESC LIMIT ?",
            (HEADROOM_LIMIT, limit),
        )
    ]


def _known_failures(
    db: sqlite3.Connection, runs: _Runs, facts: dict[str, MatrixFacts], today: dt.date
) -> list[KnownFailureRow]:
    found: list[KnownFailureRow] = []
    for lane, item in sorted(facts.items()):
        latest = runs.latest(lane)
        outcomes = (
            []
            if latest is None
            else db.execute(
                "SELECT t.nodeid, c.status FROM cases c JOIN tests t ON t.id = c.test"
                f" WHERE c.run IN ({queries.ids(runs.night(latest))})"
            ).fetchall()
        )
        for entry in item.known_failures:
            # The plugin's own matcher: brackets in an id are literal, devices filled in.
            passing = sorted(
                n for n, s in outcomes if s in ("passed", "xpass") and entry.covers(n)
            )
            expiry = entry.expires
            state = None
            if passing:
                state = "now-passing"
            elif expiry is not None and expiry < today:
                state = "expired"
            elif expiry is not None and expiry <= today + dt.timedelta(days=EXPIRY_DAYS):
                state = "expiring"
            if state:
                found.append(
                    KnownFailureRow(
                        lane,
                        entry.raw,
                        entry.reason,
                        entry.issue,
                        entry.owner,
                        expiry.isoformat() if expiry else None,
                        state,
                        passing[:20],
                    )
                )
    return found


def _changes(
    db: sqlite3.Connection, runs: _Runs, lanes: list[str]
) -> tuple[list[Change], list[Change], list[Streak]]:
    """Per lane: what its last night broke and fixed against the night before, and streaks."""
    regressions: list[Change] = []
    fixes: list[Change] = []
    streaks: list[Streak] = []
    for lane in lanes:
        lane_runs = runs.by_lane.get(lane, [])
        if len(lane_runs) >= 2:
            got = queries.changes(
                db, lane, runs.night(lane_runs[-2][0]), runs.night(lane_runs[-1][0])
            )
            regressions += got[0]
            fixes += got[1]
        streaks += queries.streaks(db, lane, lane_runs)
    return regressions, fixes, streaks


def _report_lanes(runs: _Runs, lanes: list[str]) -> list[Lane]:
    out = []
    for lane in lanes:
        rid = runs.latest(lane)
        row = runs.rows.get(rid) if rid is not None else None
        out.append(
            Lane(
                lane,
                row[2] if row else lane,
                len(runs.by_lane.get(lane, [])),
                row[0] if row else None,
                runs.by_lane[lane][-1][1] if row else None,
                row[3] if row else None,
                row[4] if row else None,
            )
        )
    return out


def build_report(
    db_path: Path,
    *,
    since: dt.timedelta,
    now: dt.datetime | None = None,
    matrices: Path | None = None,
    declared: bool = True,
    warn: Callable[[str], None] = lambda line: None,
) -> Report:
    now = now or dt.datetime.now(dt.UTC)
    warnings: list[str] = []

    def note(line: str) -> None:
        warnings.append(line)
        warn(line)

    db = connect(db_path, create=False)
    try:
        runs = _Runs(db, _iso(now - since), _iso(now))
        facts = _lane_facts(runs, load_declared(matrices, note) if declared else {}, note)
        report = _assemble(db, runs, facts, now=now, database=str(db_path), warnings=warnings)
    finally:
        db.close()
    report.headline = headline(report)
    return report


def _assemble(db: sqlite3.Connection, runs: _Runs, facts: dict[str, MatrixFacts], *,
              now: dt.datetime, database: str, warnings: list[str]) -> Report:
    """Every section of the report, from the runs of the window and the declared facts."""
    lanes = sorted(set(runs.by_lane) | set(facts))
    suites, suite_grid = _suite_grid(db, runs, lanes, facts)
    grid = _test_grid(db, runs, lanes)
    capabilities, uncovered = _capabilities(db, runs, lanes, facts)
    regressions, fixes, streaks = _changes(db, runs, lanes)
    infra = queries.infra_events(db, runs.ids)
    return Report(
        generated=_iso(dt.datetime.now(dt.UTC)),
        since=runs.start,
        until=runs.until,
        database=database,
        headline="",
        lanes=_report_lanes(runs, lanes),
        suites=suites,
        suite_grid=suite_grid,
        test_grid=grid,
        test_rows_total=len(grid),
        capabilities=capabilities,
        uncovered=uncovered,
        regressions=regressions,
        fixes=fixes,
        streaks=streaks,
        flaky=queries.flaky(db, runs.ids),
        infra=infra,
        headroom=_headroom(db, runs.latest_map(lanes)),
        error_trends=queries.error_trends(db, runs.ids),
        pass_rates=queries.pass_rates(db, runs.ids),
        fusion=queries.fusion_drift(db, runs.ids),
        known_failures=_known_failures(db, runs, facts, now.date()),
        tonight=Tonight(regressions, fixes, _new_infra(runs, lanes, infra),
                        _skipping(db, runs, lanes, suite_grid)),
        warnings=warnings,
    )


def headline(report: Report) -> str:
    """One line: what changed first, then the state of the latest runs."""
    failing = sum(
        1 for row in report.test_grid if any(s in ("failed", "error") for s in row.cells.values())
    )
    tonight = report.tonight
    ran = sum(1 for lane in report.lanes if lane.runs)
    infra = sum(1 for e in tonight.new_infra if e.scope != "case")
    skipping = sum(1 for cell in report.suite_grid if cell.state in SKIPPING)
    return (
        f"{len(tonight.regressions)} new failures, {len(tonight.fixes)} fixed, "
        f"{infra} new infra failures, {len(tonight.started_skipping)} suites started skipping"
        f" · {ran}/{len(report.lanes)} platforms ran, {report.test_rows_total} tests,"
        f" {failing} failing, {len(report.flaky)} flaky, {skipping} suites mostly skipped"
    )
