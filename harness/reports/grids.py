"""The grids of the report: platform x suite (test x platform is ``testgrid``), and the
suites that started skipping or failing for infrastructure since the night before."""

from __future__ import annotations

from harness.history.window import WindowReader
from harness.reports.matrices import MatrixFacts
from harness.reports.model import (
    SKIPPING,
    InfraEvent,
    SkipChange,
    SuiteCell,
)
from harness.reports.runs import Runs

MOSTLY_SKIPPED_RATIO = 0.5  # the fallback until the run records its own verdict
_MOSTLY = ("mostly-skipped", "mostly_skipped")


def _suite_cells(
    db: WindowReader, run_lane: dict[int, str]
) -> dict[tuple[str, str], SuiteCell]:
    """The suites that ran in the given runs, with their counts and state."""
    seen: dict[tuple[str, str], SuiteCell] = {}
    verdict: dict[tuple[str, str], bool] = {}
    status_of: dict[tuple[str, str], str | None] = {}
    for run, name, status, sig, reason, case_status, count, duration, peak in db.suite_counts(
            run_lane):
        lane = run_lane[run]
        cell = seen.get((lane, name))
        if cell is None:
            state = "infra" if sig else "passed"
            text = f"{sig}: {reason}" if sig and reason else (sig or reason or status or "")
            cell = seen[(lane, name)] = SuiteCell(lane, name, state, {}, 0.0, text)
            verdict[(lane, name)] = status in _MOSTLY
            status_of[(lane, name)] = status
        if case_status:
            cell.counts[case_status] = cell.counts.get(case_status, 0) + count
            cell.duration_s += duration
        if peak is not None:
            cell.peak_rss_mb = max(peak, cell.peak_rss_mb or 0.0)
    for ident, cell in seen.items():
        total, skipped = cell.total, cell.counts.get("skipped", 0)
        if cell.state == "infra":
            continue
        if status_of[ident] == "not-applicable":  # declared by the matrix, with its reason
            cell.state = "not-applicable"
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


def suite_grid(
    db: WindowReader, runs: Runs, lanes: list[str], facts: dict[str, MatrixFacts]
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


def skipping(
    db: WindowReader, runs: Runs, lanes: list[str], grid: list[SuiteCell]
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


def new_infra(runs: Runs, lanes: list[str], events: list[InfraEvent]) -> list[InfraEvent]:
    """Infrastructure failures of each lane's latest night that the night before lacked."""

    def keys(rid: int) -> set[str]:
        return {runs.rows[member].key for member in runs.night(rid)}

    latest: dict[str, set[str]] = {}
    previous: dict[str, set[str]] = {}
    for lane in lanes:
        nights = runs.by_lane.get(lane, [])
        if nights:
            latest[lane] = keys(nights[-1][0])
        if len(nights) >= 2:
            previous[lane] = keys(nights[-2][0])
    seen_before = {
        (e.lane, e.scope, e.name, e.label)
        for e in events
        if e.run in previous.get(e.lane, set())
    }
    return [
        e
        for e in events
        if e.run in latest.get(e.lane, set())
        and (e.lane, e.scope, e.name, e.label) not in seen_before
    ]
