"""A pull-request pipeline: only the lanes a change affects, with shards sized to it.

Each kept lane's steps run ``harness run --changed-since <sha>``, which selects the same
tests on every shard and balances the shards over those tests only
(``harness.plugin.select`` deselects before ``harness.plugin.shard`` splits). The
number of shards follows the selected share of the lane's time, by the history's
durations of that lane, else of its most-timed sibling lane (a lane with no history at
all keeps its configured count).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from harness.ci.pipeline import CiTarget
from harness.results.layout import Lane
from harness.select.rules import LaneSelection, Selection
from harness.shard.durations import DurationSet, durations_for

# lane -> the durations file of that lane, or None where there is no history
Durations = Callable[[str], DurationSet | None]


def selected_share(lane: LaneSelection,
                   durations: DurationSet | None) -> tuple[float, str] | None:
    """The selected tests' part of the lane's time and whose history said so (the lane's,
    else the sibling lane with the most timed tests); None without any history."""
    if durations is None:
        return None
    source, timed = "its", durations.durations
    if not timed and durations.siblings:
        # a sibling's ids are device-free keys; the kernel and module tokens are all there
        name, timed = max(durations.siblings.items(), key=lambda kv: (len(kv[1]), kv[0]))
        source = f"{name}'s"
    total = sum(s for s in timed.values() if s > 0)
    if total <= 0:
        return None
    return sum(s for t, s in timed.items() if s > 0 and lane.selects(t)) / total, source


def pr_targets(targets: Sequence[CiTarget], selection: Selection, durations: Durations,
               engine_args: str = "") -> tuple[list[CiTarget], list[str]]:
    """The affected lanes' targets and one note line per lane (kept or dropped, why).
    ``engine_args`` (`` --engine-source S --engine-change C``) select an engine change in
    each step as they did here."""
    kept: list[CiTarget] = []
    notes: list[str] = []
    if selection.ref:
        notes.append(f"--changed-since {selection.ref[:12]}: "
                     f"{len(selection.changed)} changed file(s)")
    if selection.engine:
        notes.append(f"engine change to {selection.engine}: "
                     f"{len(selection.engine_changed)} changed file(s)")
    for target in targets:
        lane = selection.lanes.get(target.matrix)
        if lane is None or not lane.affected:
            notes.append(f"{target.matrix}: not affected")
            continue
        args = ((f" --changed-since {selection.ref}" if selection.ref else "") + engine_args
                + (" --docker" if lane.docker else ""))
        if lane.full:
            why = "; ".join(f"{p}: {w}" for p, w in lane.reasons)
            notes.append(f"{target.matrix}: all, {target.shards} shard(s) ({why})")
            # an image recipe changed: that lane runs in its (rebuilt) image
            kept.append(replace(target, select_args=args, why=why,
                                docker=target.docker or lane.docker))
            continue
        found = selected_share(lane, durations(target.matrix))
        shards = target.shards if found is None else max(
            1, min(target.shards, math.ceil(target.shards * found[0] - 1e-9)))
        sources = ", ".join(sorted({r.source for r in lane.rules}))
        size = ("no history to size it" if found is None
                else f"{100 * found[0]:.1f}% of the time by {found[1]} history")
        notes.append(f"{target.matrix}: part, {shards} of {target.shards} shard(s) "
                     f"({size}; selected by {sources})")
        kept.append(replace(target, shards=shards, select_args=args, why=sources,
                            docker=target.docker or lane.docker))
    return kept, notes


def history_durations(db: Path) -> Durations:
    def lookup(lane: str) -> DurationSet | None:
        return durations_for(Lane.parse(lane), db) if db.is_file() else None

    return lookup
