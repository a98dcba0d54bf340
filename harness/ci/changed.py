"""A pull-request pipeline: only the lanes a change affects, with shards sized to it.

Each kept lane's steps run ``harness run --changed-since <sha>``, which selects the same
tests on every shard and balances the shards over those tests only
(``harness.select.plugin`` deselects before ``harness.plugin_shard`` splits). The
number of shards follows the selected share of the lane's time, by the history's
durations of that lane (a lane with no history keeps its configured count).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.ci.pipeline import CiTarget

# lane -> the durations file of that lane, or None where there is no history
Durations = Callable[[str], Any]


def selected_share(lane: Any, durations: Any) -> float | None:
    """The selected tests' part of the lane's time, by its history; None if unknown."""
    if durations is None or not durations.durations:
        return None
    from harness.shard import estimate_durations

    ids = sorted(durations.durations)
    estimates = estimate_durations(ids, durations.durations, durations.siblings)
    total = sum(e.seconds for e in estimates.values())
    if total <= 0:
        return None
    return sum(estimates[t].seconds for t in ids if lane.selects(t)) / total


def pr_targets(targets: Sequence[CiTarget], selection: Any,
               durations: Durations) -> tuple[list[CiTarget], list[str]]:
    """The affected lanes' targets and one note line per lane (kept or dropped, why)."""
    kept: list[CiTarget] = []
    notes: list[str] = [f"--changed-since {selection.ref[:12]}: "
                        f"{len(selection.changed)} changed file(s)"]
    for target in targets:
        lane = selection.lanes.get(target.matrix)
        if lane is None or not lane.affected:
            notes.append(f"{target.matrix}: not affected")
            continue
        args = f" --changed-since {selection.ref}" + (" --docker" if lane.docker else "")
        if lane.full:
            why = "; ".join(f"{p}: {w}" for p, w in lane.reasons)
            notes.append(f"{target.matrix}: all, {target.shards} shard(s) ({why})")
            kept.append(replace(target, select_args=args, why=why))
            continue
        share = selected_share(lane, durations(target.matrix))
        shards = target.shards if share is None else max(
            1, min(target.shards, math.ceil(target.shards * share - 1e-9)))
        sources = ", ".join(sorted({r.source for r in lane.rules}))
        size = ("no history to size it" if share is None
                else f"{100 * share:.1f}% of its time by history")
        notes.append(f"{target.matrix}: part, {shards} of {target.shards} shard(s) "
                     f"({size}; selected by {sources})")
        kept.append(replace(target, shards=shards, select_args=args, why=sources))
    return kept, notes


def history_durations(db: Path) -> Durations:
    from harness.shard_durations import durations_for

    def lookup(lane: str) -> Any:
        return durations_for(lane, db) if db.is_file() else None

    return lookup
