"""Did the shards of one build plan alike? (``harness ci check-shards DIR...``)

Every shard collects the whole suite and plans all N shards from the durations file it
was given, then keeps its own part; the shards partition the suite only if they all
computed the same plan. Each sharded suite writes its plan (``shard-plans/<suite>-shard-
<i>-of-<N>.json`` in its run folder: the plan's fingerprint and counts); this reads the
run folders of a build (as an artifact download lays them out) and compares. Shards that
planned differently overlap or miss tests without any test failing: an infrastructure
failure (exit 3), never a silent pass.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError, InfraError
from harness.results import layout
from harness.results.manifest import RunRecord
from harness.shard.plan import PLANS_DIR


@dataclass(frozen=True, kw_only=True)
class ShardPlan:
    lane: str
    build: str
    suite: str
    index: int
    count: int
    fingerprint: str
    run: Path


def read_plans(paths: Iterable[Path]) -> tuple[list[ShardPlan], list[str]]:
    """Every shard plan under ``paths``, and one line per file that could not be read."""
    plans: list[ShardPlan] = []
    problems: list[str] = []
    for path in paths:
        for run in layout.run_folders(path):
            try:
                record = RunRecord.read(run)
            except HarnessError as error:
                problems.append(str(error))
                continue
            lane = str(record.lane)
            for file in sorted((run / PLANS_DIR).glob("*.json")):
                try:
                    data = json.loads(file.read_text(encoding="utf-8"))
                    shard = layout.Shard.parse(str(data["shard"]))
                    suite, _ = layout.suite_of(file)
                    plans.append(ShardPlan(
                        lane=lane, build=record.build or "(no build id)", suite=suite,
                        index=shard.index, count=shard.count,
                        fingerprint=str(data["fingerprint"]), run=run))
                except (OSError, ValueError, KeyError, TypeError) as error:
                    problems.append(f"{file}: not a shard plan ({error})")
    return plans, problems


def check(plans: Sequence[ShardPlan]) -> tuple[list[str], list[str]]:
    """(one line per suite of a build whose shards agree, one per suite whose do not)."""
    groups: dict[tuple[str, str, str, int], list[ShardPlan]] = defaultdict(list)
    for plan in plans:
        groups[(plan.lane, plan.build, plan.suite, plan.count)].append(plan)
    agreed: list[str] = []
    differ: list[str] = []
    for (lane, build, suite, count), members in sorted(groups.items()):
        name = f"{lane} {suite} (build {build}, {count} shards)"
        seen = sorted({p.index for p in members})
        missing = sorted(set(range(1, count + 1)) - set(seen))
        prints = sorted({p.fingerprint for p in members})
        if len(prints) > 1:
            each = ", ".join(f"{p.index}/{count} plan {p.fingerprint}"
                             for p in sorted(members, key=lambda p: (p.index, str(p.run))))
            differ.append(f"{name}: the shards planned differently ({each}): they overlap or "
                          "miss tests; give every shard the same --durations file")
            continue
        note = f"; no plan from shard(s) {', '.join(map(str, missing))}" if missing else ""
        agreed.append(f"{name}: {len(seen)} shard(s) planned alike, plan {prints[0]}{note}")
    return agreed, differ


def check_paths(paths: Sequence[Path]) -> list[str]:
    """The lines to print; raises InfraError (exit 3) when a build's shards disagree."""
    for path in paths:
        if not path.is_dir():
            raise InfraError(f"{path}: no such folder (the build's downloaded run folders)")
    plans, problems = read_plans(paths)
    agreed, differ = check(plans)
    if differ or problems:
        raise InfraError("; ".join([*differ, *problems]))
    return agreed or ["no sharded run under " + ", ".join(map(str, paths))]
