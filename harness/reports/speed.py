"""The speed tier per platform and over time: each lane's ratios (engine kernel over the
platform's baseline, results/speed.py) night by night, its own noise band, and the cases of
its latest night that are slower than that band, folded from the history's rows.

A lane's band for a case is the ratios of its earlier nights that were not themselves
regressions: a slowdown that stays is still flagged the nights after, with the night it
started ("since"), until the window no longer holds the nights before it. A lane with too
few earlier nights has no band yet and nothing is flagged, said so; a lane whose cases all
say why they recorded no speed (an emulated CPU or device, Triton's interpreter) says that.
"""

from __future__ import annotations

import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from harness.history.window import SpeedPoint, WindowReader
from harness.reports.model import SpeedLane, SpeedRegression, SpeedRow
from harness.reports.runs import Runs
from harness.results.layout import Lane
from harness.results.speed import MIN_NIGHTS, Band, band, ratio_of


@dataclass
class _Case:
    """One case of one lane, night by night."""

    nodeid: str = ""
    op: str = ""
    ratios: list[tuple[str, float]] = field(default_factory=list)  # (night started, ratio)


def _walk(ratios: list[float]) -> tuple[list[bool], Band | None]:
    """Each night regressed or not against the band of the earlier unregressed nights;
    and the band the last night was judged against (None: none yet)."""
    kept: list[float] = []
    flags: list[bool] = []
    found: Band | None = None
    for ratio in ratios:
        found = band(kept)
        slow = found is not None and found.regressed(ratio)
        flags.append(slow)
        if not slow:
            kept.append(ratio)
    return flags, found


def _command(lane: str, matrix: str, nodeid: str) -> str:
    emulate = " --emulate" if Lane.parse(lane).emulated else ""
    return f"harness run --matrix {shlex.quote(matrix)}{emulate} --test {shlex.quote(nodeid)}"


def _fold(points: list[SpeedPoint], runs: Runs, lane: str
          ) -> tuple[dict[str, _Case], Counter[str], int]:
    """The lane's cases with their ratio per night; the reasons of its latest night's
    cases that recorded none; and how many of its nights had a speed."""
    night_of = runs.night_of(lane)
    latest = runs.latest(lane)
    cases: dict[str, _Case] = defaultdict(_Case)
    reasons: Counter[str] = Counter()
    nights: set[int] = set()
    for point in points:
        night, started = night_of[point.run]
        ratio = ratio_of(point.ratio)
        if ratio is None:
            if night == latest and point.skipped:
                reasons[point.skipped] += 1
            continue
        case = cases[point.key]
        case.nodeid = point.nodeid
        case.op = " ".join(filter(None, (point.op, point.provider, point.dtype))) or point.key
        if case.ratios and case.ratios[-1][0] == started:
            continue  # a night's shards ran it once
        case.ratios.append((started, ratio))
        nights.add(night)
    return cases, reasons, len(nights)


def _note(timed: int, reasons: Counter[str], nights: int) -> str:
    if not timed and reasons:
        return "no speed recorded: " + "; ".join(r for r, _ in reasons.most_common(2))
    if nights <= MIN_NIGHTS:
        return (f"no band yet: {max(nights - 1, 0)} earlier night(s) with a speed, "
                f"{MIN_NIGHTS} needed; nothing flagged")
    return ""


def speed_view(db: WindowReader, runs: Runs, lanes: list[str]
               ) -> tuple[list[SpeedRegression], list[SpeedRow], list[SpeedLane]]:
    """The regressions of each lane's latest night, the op x lane rows, each lane's state."""
    by_lane: dict[str, list[SpeedPoint]] = defaultdict(list)
    lane_of = {m: lane for lane in lanes for m in runs.night_of(lane)}
    for point in db.speeds(runs.ids):
        if point.run in lane_of:
            by_lane[lane_of[point.run]].append(point)
    regressions: list[SpeedRegression] = []
    rows: dict[str, SpeedRow] = {}
    states: list[SpeedLane] = []
    for lane in lanes:
        if not by_lane.get(lane):
            continue
        cases, reasons, nights = _fold(by_lane[lane], runs, lane)
        latest = runs.latest(lane)
        last_started = runs.rows[latest].started if latest is not None else ""
        timed = 0
        for key, case in cases.items():
            values = [r for _, r in case.ratios]
            flags, judged_by = _walk(values)
            row = rows.setdefault(case.op, SpeedRow(name=case.op))
            row.trend[lane] = values
            if case.ratios[-1][0] != last_started:
                continue  # not timed on the latest night
            timed += 1
            row.ratio[lane] = values[-1]
            row.regressed[lane] = flags[-1]
            if flags[-1] and judged_by is not None:
                start = len(flags) - 1
                while start > 0 and flags[start - 1]:
                    start -= 1
                matrix = runs.rows[latest].matrix if latest is not None else lane
                regressions.append(SpeedRegression(
                    lane=lane, key=key, op=case.op, ratio=values[-1],
                    median=judged_by.median, high=judged_by.high, nights=judged_by.nights,
                    slower=judged_by.slowdown(values[-1]),
                    since=case.ratios[start][0], command=_command(lane, matrix, case.nodeid)))
        states.append(SpeedLane(lane=lane, timed=timed, skipped=sum(reasons.values()),
                                nights=nights, note=_note(timed, reasons, nights)))
    regressions.sort(key=lambda r: -r.slower)
    return regressions, [rows[name] for name in sorted(rows)], states
