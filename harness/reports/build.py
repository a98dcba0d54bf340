"""Build the report model from the history's rows (``history/window.py``) and the
matrices' facts; no SQL here."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from harness.history.window import WindowReader, open_window
from harness.matrix.known_failures import Entry
from harness.reports import queries
from harness.reports.grids import new_infra, skipping, suite_grid
from harness.reports.matrices import MatrixFacts, load_declared
from harness.reports.model import (
    SKIPPING,
    CapabilityRow,
    Change,
    HeadroomRow,
    KnownFailureRow,
    LaneSummary,
    Report,
    Streak,
    Tonight,
)
from harness.reports.ops import op_view
from harness.reports.runs import Runs, iso, lane_facts
from harness.reports.speed import speed_view
from harness.reports.testgrid import grid_rows
from harness.results.case_meaning import NEW_FAILURES, WORKS

HEADROOM_LIMIT = 0.8
EXPIRY_DAYS = 14
_SPLIT = re.compile(r"[,\s]+")


def _capabilities(
    db: WindowReader, runs: Runs, lanes: list[str], facts: dict[str, MatrixFacts]
) -> tuple[list[CapabilityRow], list[tuple[str, str]]]:
    exercised: dict[tuple[str, str], set[int]] = defaultdict(set)
    for lane, test, requires in db.exercised(runs.ids):
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


def _headroom(db: WindowReader, latest: dict[int, str], limit: int = 500) -> list[HeadroomRow]:
    return [
        HeadroomRow(latest[run], key, op or "", dtype or "", provider or "", head, err, atol)
        for run, key, op, dtype, provider, head, err, atol
        in db.headroom(latest, HEADROOM_LIMIT, limit)
    ]


def _night_record(
    db: WindowReader, runs: Runs, lane: str, tests: set[int], entry: Entry
) -> tuple[int, int]:
    """(nights every case of ``tests`` that ran passed, nights any ran) over the lane's
    nights in the window: how an intermittent (quarantined) known failure is doing."""
    night_of = {m: night for m, (night, _) in runs.night_of(lane).items()}
    outcomes: dict[int, list[str]] = defaultdict(list)
    for run, status, applied in db.ran_with_known_failure(tests, night_of):
        if applied or not entry.host:
            outcomes[night_of[run]].append(status)
    passed = sum(all(s in WORKS for s in night) for night in outcomes.values())
    return passed, len(outcomes)


def _passing(entry: Entry, covered: list[tuple[int, str, str]]) -> list[str]:
    """The node ids by which ``entry`` now passes on the latest night. A quarantined
    (intermittent) entry passes a night only when every case it covers that ran passed,
    as its record over the nights counts one (``_night_record``): never "now passing"
    with "passed 0 of the last 1 nights"."""
    ran = [(n, s) for _, n, s in covered if s != "skipped"]
    if entry.action == "quarantine" and any(s not in WORKS for _, s in ran):
        return []
    return sorted(n for n, s in ran if s in WORKS)


def _known_failures(
    db: WindowReader, runs: Runs, facts: dict[str, MatrixFacts], today: dt.date
) -> list[KnownFailureRow]:
    found: list[KnownFailureRow] = []
    for lane, item in sorted(facts.items()):
        latest = runs.latest(lane)
        outcomes = [] if latest is None else db.night_cases(runs.night(latest))
        for entry in item.known_failures:
            # The plugin's own matcher: brackets in an id are literal, devices filled in.
            # An entry that depends on the host counts a pass only where the plugin applied
            # it (that run's host met the condition); elsewhere the case is meant to pass.
            covered = [
                (test, n, s) for test, n, s, applied in outcomes
                if entry.covers(n) and (applied or not entry.host)
            ]
            passing = _passing(entry, covered)
            expiry = entry.expires
            state = None
            record: tuple[int, int] | None = None
            if passing:
                state = "now-passing"
                if entry.action == "quarantine":  # it may pass some nights and not others
                    record = _night_record(db, runs, lane, {t for t, _, _ in covered}, entry)
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
                        entry.action,
                        record,
                    )
                )
    return found


def _changes(
    db: WindowReader, runs: Runs, lanes: list[str]
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


def _kernel_library(fingerprint: str | None) -> str:
    try:
        value = json.loads(fingerprint or "{}").get("kernel_library", "")
    except (ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


def _report_lanes(runs: Runs, lanes: list[str]) -> list[LaneSummary]:
    out = []
    for lane in lanes:
        rid = runs.latest(lane)
        row = runs.rows.get(rid) if rid is not None else None
        skipped, library = "", ""
        if row:
            if row.status == "skipped":  # harness run --skip-unavailable: the probe's line
                skipped = row.infra_message or "skipped"
            library = _kernel_library(row.fingerprint)
        out.append(
            LaneSummary(
                lane,
                row.matrix if row else lane,
                len(runs.by_lane.get(lane, [])),
                row.key if row else None,
                runs.by_lane[lane][-1][1] if row else None,
                row.status if row else None,
                row.infra_label if row else None,
                skipped,
                library,
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

    with open_window(db_path) as db:
        start, until = iso(now - since), iso(now)
        runs = Runs(db.runs(start, until), start, until)
        facts = lane_facts(runs, load_declared(matrices, note) if declared else {}, note)
        report = _assemble(db, runs, facts, now=now, database=str(db_path), warnings=warnings)
    report.headline = headline(report)
    return report


def _assemble(db: WindowReader, runs: Runs, facts: dict[str, MatrixFacts], *,
              now: dt.datetime, database: str, warnings: list[str]) -> Report:
    """Every section of the report, from the runs of the window and the declared facts."""
    lanes = sorted(set(runs.by_lane) | set(facts))
    suites, cells = suite_grid(db, runs, lanes, facts)
    grid, grid_total = grid_rows(db, runs.ids, runs.latest_map(lanes), lanes)
    capabilities, uncovered = _capabilities(db, runs, lanes, facts)
    regressions, fixes, streaks = _changes(db, runs, lanes)
    infra = queries.infra_events(db, runs.ids)
    ops, op_coverage = op_view(db, runs, lanes, facts)
    speed_regressions, speed, speed_lanes = speed_view(db, runs, lanes)
    return Report(
        generated=iso(dt.datetime.now(dt.UTC)),
        since=runs.start,
        until=runs.until,
        database=database,
        headline="",
        lanes=_report_lanes(runs, lanes),
        suites=suites,
        suite_grid=cells,
        test_grid=grid,
        test_rows_total=grid_total,
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
        tonight=Tonight(regressions, fixes, new_infra(runs, lanes, infra),
                        skipping(db, runs, lanes, cells)),
        warnings=warnings,
        ops=ops,
        op_coverage=op_coverage,
        speed_regressions=speed_regressions,
        speed=speed,
        speed_lanes=speed_lanes,
    )


def headline(report: Report) -> str:
    """One line: what changed first, then the state of the latest runs."""
    failing = sum(
        1 for row in report.test_grid if any(s in NEW_FAILURES for s in row.cells.values())
    )
    tonight = report.tonight
    ran = sum(1 for lane in report.lanes if lane.runs and not lane.skipped)
    skipped = sum(1 for lane in report.lanes if lane.skipped)
    infra = sum(1 for e in tonight.new_infra if e.scope != "case")
    skipping = sum(1 for cell in report.suite_grid if cell.state in SKIPPING)
    return (
        f"{len(tonight.regressions)} new failures, {len(tonight.fixes)} fixed, "
        f"{infra} new infra failures, {len(tonight.started_skipping)} suites started skipping"
        + (f", {len(report.speed_regressions)} slower" if report.speed_regressions else "")
        + f" · {ran}/{len(report.lanes)} platforms ran"
        + (f" ({skipped} skipped on a host not theirs)" if skipped else "")
        + f", {report.test_rows_total} tests,"
        f" {failing} failing, {len(report.flaky)} flaky, {skipping} suites mostly skipped"
    )
