"""The runs of the report's window, grouped by lane into nights, and what each lane's
matrix declares."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterable

from harness.history.window import RunRow
from harness.reports.matrices import MatrixFacts, facts_from_json, facts_from_matrix
from harness.results.layout import Lane


def iso(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Runs:
    """The runs in the window, grouped by lane into nights, oldest first.

    A night is one run, or the shards of one CI build (same ``build``, shards ``i/N``
    with distinct ``i``): ``by_lane`` names each night by its first run, ``members``
    lists all of its runs.
    """

    def __init__(self, rows: Iterable[RunRow], since: str, until: str) -> None:
        """``rows``: the window's runs (``WindowReader.runs``), oldest first."""
        self.start, self.until = since, until
        self.by_lane: dict[str, list[tuple[int, str]]] = defaultdict(list)
        self.rows: dict[int, RunRow] = {}
        self.members: dict[int, list[int]] = {}
        shards: dict[int, tuple[str, str, set[str]]] = {}  # night -> (build, N, indexes)
        for row in rows:
            rid, lane, started, build = row.id, row.lane, row.started, row.build
            self.rows[rid] = row
            index, _, total = (row.shard or "").partition("/")
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

    def night_of(self, lane: str) -> dict[int, tuple[int, str]]:
        """Every run of ``lane``'s nights -> (its night, when the night started)."""
        return {member: (night, started) for night, started in self.by_lane.get(lane, ())
                for member in self.night(night)}


def lane_facts(
    runs: Runs, declared: dict[str, MatrixFacts], warn: Callable[[str], None]
) -> dict[str, MatrixFacts]:
    facts: dict[str, MatrixFacts] = {}
    for lane, lane_runs in runs.by_lane.items():
        latest = runs.rows[lane_runs[-1][0]]
        key, matrix, mjson = latest.key, latest.matrix, latest.matrix_json
        emulate = Lane.parse(lane).emulated
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
