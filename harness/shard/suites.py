"""Which shard of a lane runs which suite: whole suites where the history times them.

A lane of many suites (``harness import buildkite --per-file`` makes one per test file)
sharded test by test makes every shard start every suite: each shard imports the engine
once per file and holds its memory, for a part of each file. So a shard plans the lane's
suites first, from the ``suites`` of the durations file every shard of the build reads
(each suite's recent wall time and test peak memory on this lane, shard/durations.py):

- a suite the history times, and that is no more than a shard's fair share of the lane
  (the lane's time over N), goes whole to one shard: longest first, onto the shard with
  the least planned time (ties: the one with fewer suites, then the lower shard);
- a suite longer than a fair share, or one the history does not time, is split test by
  test on every shard as before (harness.shard.plan): each shard plans its part alike.

The wall time is the suite's as it last ran on the lane, with the workers memory allowed
it there (run/memory.py): a file whose tests need more memory than a worker's share ran
with fewer workers and took longer, and is planned so. Suites of one shard run one after
another, each its own process(es), so a shard holds at most its largest suite's peak at
once, never two files' together; each shard's peak is printed beside its time, and a
suite that cannot fit the agent is refused there before it runs (run/memory.py).

Every input is sorted and read from the one file: every shard computes the same plan,
written to ``shard-plans/`` for ``harness ci check-shards`` like a suite's own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# The stem of the lane plan's file in shard-plans/: no suite is called this (its
# parentheses keep it apart from a matrix's suite names in ci check-shards' lines).
LANE_PLAN = "(suites)"


@dataclass(frozen=True, kw_only=True)
class SuiteCost:
    """A suite's recent wall time on the lane, and the most memory one of its test
    processes held there (None: not recorded)."""

    seconds: float
    peak_mb: float | None = None


@dataclass(frozen=True, kw_only=True)
class LanePlan:
    count: int
    whole: Mapping[str, int]  # suite -> the one shard (1-based) that runs it whole
    split: tuple[str, ...]  # suites every shard runs a part of, test by test
    loads: tuple[float, ...]  # planned seconds per shard (a split suite's 1/N on each)
    peaks: tuple[float | None, ...]  # the largest recorded peak among each shard's suites
    fingerprint: str

    def runs_here(self, index: int) -> list[str]:
        """The suites shard ``index`` runs (whole or its part), sorted."""
        return sorted([s for s, i in self.whole.items() if i == index] + list(self.split))

    def as_dict(self, index: int) -> dict[str, object]:
        return {"shard": f"{index}/{self.count}", "fingerprint": self.fingerprint,
                "whole": {s: i for s, i in sorted(self.whole.items())},
                "split": list(self.split),
                "loads": [round(x, 1) for x in self.loads]}


def plan_lane(suites: Sequence[str], costs: Mapping[str, SuiteCost], count: int) -> LanePlan:
    """The lane's suites over ``count`` shards (see the module's docstring)."""
    names = sorted(set(suites))
    timed = {s: costs[s] for s in names if s in costs and costs[s].seconds >= 0}
    fair = sum(c.seconds for c in timed.values()) / count if count else 0.0
    split = tuple(s for s in names if s not in timed or timed[s].seconds > fair or count == 1)
    loads = [sum(timed[s].seconds for s in split if s in timed) / count] * count
    peaks: list[float | None] = [_larger(None, *(timed[s].peak_mb for s in split if s in timed))
                                 ] * count
    whole: dict[str, int] = {}
    held = [0] * count
    for suite in sorted((s for s in timed if s not in split),
                        key=lambda s: (-timed[s].seconds, s)):
        shard = min(range(count), key=lambda i: (loads[i], held[i], i))
        whole[suite] = shard + 1
        held[shard] += 1
        loads[shard] += timed[suite].seconds
        peaks[shard] = _larger(peaks[shard], timed[suite].peak_mb)
    digest = hashlib.sha256(json.dumps(
        {"count": count, "whole": sorted(whole.items()), "split": list(split)},
    ).encode()).hexdigest()[:16]
    return LanePlan(count=count, whole=whole, split=split, loads=tuple(loads),
                    peaks=tuple(peaks), fingerprint=digest)


def _larger(first: float | None, *others: float | None) -> float | None:
    known = [x for x in (first, *others) if x is not None]
    return max(known) if known else None


def describe(plan: LanePlan, index: int) -> str:
    """The line a shard prints of the lane's plan."""
    here = sorted(s for s, i in plan.whole.items() if i == index)
    elsewhere = len(plan.whole) - len(here)
    peak = plan.peaks[index - 1]
    parts = [f"{len(here)} whole here ({', '.join(here) or 'none'})"]
    if plan.split:
        parts.append(f"{len(plan.split)} split test by test on every shard "
                     f"({', '.join(plan.split)})")
    parts.append(f"{elsewhere} whole on other shards")
    return (f"shard {index}/{plan.count} of the lane's suites: {'; '.join(parts)}; planned "
            f"{plan.loads[index - 1]:.0f} s" + (f", peak {peak:.0f} MB a test process"
                                                  if peak is not None else "")
            + f" (plan {plan.fingerprint})")
