"""Split a suite's tests into N shards of near-equal duration.

Every shard of a CI job collects the same tests and computes the same plan from the
same inputs, then keeps its own part, so the shards partition the suite exactly with
no coordination. Inputs are sorted first: the plan never depends on collection order.

Durations come from the history of this matrix. A test never timed here is estimated,
best source first: the same test on a sibling matrix scaled by the two matrices'
speed ratio, a model of duration from the test's parameters fitted on this matrix's
timed tests (``harness.shard.estimate``, fitted here, at plan time), the median of its
module, the median of the suite, 1 second.

Tests that must share a process travel as one unit (a group); see ``module_groups``.

Measured, sibling and median durations are planned together. The model's duration is a
guess (an expected value) whose error is skewed: most such tests take less, a rare one
30x more. The model's guesses go, longest first, onto the fewest shards that hold them at
``UNCERTAIN_FILL`` of a shard, with headroom for their spread (``cv`` of one guess from
the model's residuals; ``HEADROOM_SD`` standard deviations of a shard's sum of m guesses,
about cv / sqrt(m)); the rest fill all shards. The shards planned without guesses finish
when planned, and a shard of many guesses strays less, relative to its plan, than a few
guesses on every shard would. bench/shard_balance.py (``30%-no-sibling``) measures it.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.errors import UsageError
from harness.results.layout import Shard
from harness.shard.estimate import DurationModel, module_of

# A sibling needs this many tests in common before its speed ratio is trusted.
MIN_COMMON = 3
DEFAULT_SECONDS = 1.0
# Estimates that are guesses from other tests with a known spread (an expected value, not
# this test's own time here or on a sibling): planned apart, with headroom. A median is
# not an expected value (it undercounts a skewed module): it is planned with the rest, so
# that its shortfall spreads over every shard instead of piling onto a few.
GUESSES = ("model",)
UNCERTAIN_FILL = 0.9  # of a shard's mean load, at most, from guessed units
# A shard of m guesses, each off by a relative standard deviation cv, is planned with
# HEADROOM_SD * cv / sqrt(m) of its guessed seconds to spare.
HEADROOM_SD = 0.5

# <run folder>/shard-plans/<suite>-shard-<i>-of-<N>.json: the plan each sharded suite
# computed (its fingerprint), compared across a build by `harness ci check-shards`.
PLANS_DIR = "shard-plans"


def parse_shard(spec: str) -> tuple[int, int]:
    """``"i/N"`` (1-based) -> (i, N)."""
    try:
        shard = Shard.parse(spec)
    except ValueError:
        raise UsageError(f"--shard {spec!r}: expected i/N with 1 <= i <= N, e.g. 2/4") from None
    return shard.index, shard.count


def _usable(value: float) -> bool:
    return math.isfinite(value) and value >= 0


def _median(values: Iterable[float]) -> float | None:
    data = [v for v in values if _usable(v)]
    return statistics.median(data) if data else None


@dataclass(frozen=True, kw_only=True)
class Estimate:
    seconds: float
    source: str  # "history" | "sibling:<matrix>" | "model" | "module" | "global" | "default"
    cv: float = 0.0  # a model guess's relative standard deviation

    @property
    def guessed(self) -> bool:
        """The model's expected seconds from other tests' times, with their spread."""
        return self.source in GUESSES


def sibling_scales(
    durations: Mapping[str, float], siblings: Mapping[str, Mapping[str, float]]
) -> list[tuple[str, float]]:
    """(sibling, factor to turn its seconds into ours), most common tests first.

    The factor is the ratio of the two matrices' medians over the tests both timed: a
    platform twice as fast halves every estimate taken from it.
    """
    ranked: list[tuple[int, str, float]] = []
    for name, theirs in siblings.items():
        common = [t for t in durations if t in theirs
                  and _usable(durations[t]) and _usable(theirs[t])]
        if len(common) < MIN_COMMON:
            continue
        ours_med = statistics.median(durations[t] for t in common)
        theirs_med = statistics.median(theirs[t] for t in common)
        if theirs_med <= 0 or ours_med <= 0:
            continue
        ranked.append((-len(common), name, ours_med / theirs_med))
    ranked.sort()
    return [(name, factor) for _, name, factor in ranked]


def estimate_durations(
    test_ids: Sequence[str],
    durations: Mapping[str, float],
    sibling_durations: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, Estimate]:
    """A duration for every test id, measured or estimated, with where it came from."""
    scales = sibling_scales(durations, sibling_durations or {})
    by_module: dict[str, list[float]] = {}
    for test, seconds in durations.items():
        if _usable(seconds):
            by_module.setdefault(module_of(test), []).append(seconds)
    global_median = _median(durations.values())
    module_medians = {m: statistics.median(v) for m, v in by_module.items()}

    out: dict[str, Estimate] = {}
    # fitted on first need (most plans time every test); None: too few timed tests
    model: DurationModel | Literal[False] | None = False
    for test in test_ids:
        known = durations.get(test)
        if known is not None and _usable(known):
            out[test] = Estimate(seconds=known, source="history")
            continue
        estimate = _from_sibling(test, scales, sibling_durations or {})
        if estimate is None:
            if model is False:
                from harness.shard.estimate import fit

                model = fit(durations)
            if model is not None and model.knows(test):
                estimate = Estimate(seconds=model.predict(test), source="model", cv=model.cv)
        if estimate is None and module_of(test) in module_medians:
            estimate = Estimate(seconds=module_medians[module_of(test)], source="module")
        if estimate is None and global_median is not None:
            estimate = Estimate(seconds=global_median, source="global")
        out[test] = estimate or Estimate(seconds=DEFAULT_SECONDS, source="default")
    return out


def _from_sibling(
    test: str, scales: list[tuple[str, float]], siblings: Mapping[str, Mapping[str, float]]
) -> Estimate | None:
    for name, factor in scales:
        seconds = siblings[name].get(test)
        if seconds is not None and _usable(seconds):
            return Estimate(seconds=seconds * factor, source=f"sibling:{name}")
    return None


def module_groups(test_ids: Iterable[str], together: Iterable[str]) -> dict[str, str]:
    """Group key per test: tests in ``together`` share a key per module."""
    wanted = set(together)
    return {t: f"module:{module_of(t)}" for t in test_ids if t in wanted}


@dataclass(frozen=True, kw_only=True)
class ShardPlan:
    shards: tuple[tuple[str, ...], ...]  # test ids per shard, sorted
    loads: tuple[float, ...]  # estimated seconds per shard
    sources: Mapping[str, int]  # how many estimates came from each source
    fingerprint: str  # equal on every shard that computed the same plan

    def ratio(self) -> float:
        """Longest shard over the mean shard (1.0 is perfect), by the estimates."""
        mean = sum(self.loads) / len(self.loads)
        return max(self.loads) / mean if mean > 0 else 1.0


def make_plan(
    test_ids: Sequence[str],
    durations: Mapping[str, float],
    sibling_durations: Mapping[str, Mapping[str, float]] | None,
    n: int,
    groups: Mapping[str, str] | None = None,
) -> ShardPlan:
    if n < 1:
        raise UsageError(f"shard count must be at least 1, got {n}")
    ids = sorted(set(test_ids))
    estimates = estimate_durations(ids, durations, sibling_durations)
    units: dict[str, list[str]] = {}
    for test in ids:
        key = (groups or {}).get(test)
        units.setdefault(f"g:{key}" if key is not None else f"t:{test}", []).append(test)
    sizes = {key: sum(estimates[t].seconds for t in members) for key, members in units.items()}
    guesses = [estimates[t] for t in ids if estimates[t].guessed]
    guessed = {key for key, members in units.items()
               if any(estimates[t].guessed for t in members)}
    k = _guess_shards(sizes, guessed, n)
    planned = dict(sizes)
    if guesses:
        # the guesses' relative spread, weighted by their seconds; per shard of m guesses
        # the sum strays about cv / sqrt(m)
        total = sum(e.seconds for e in guesses)
        cv = sum(e.cv * e.seconds for e in guesses) / total if total > 0 else 0.0
        headroom = 1.0 + HEADROOM_SD * cv / math.sqrt(len(guesses) / k)
        planned.update({key: sizes[key] * headroom for key in guessed})
        k = _guess_shards(planned, guessed, n)

    bins = _lpt_apart(planned, guessed, n, k)
    _refine(bins, planned)
    shards = tuple(tuple(sorted(t for key in b for t in units[key])) for b in bins)
    loads = tuple(sum(sizes[key] for key in b) for b in bins)
    sources: dict[str, int] = {}
    for est in estimates.values():
        kind = est.source.split(":", 1)[0]
        sources[kind] = sources.get(kind, 0) + 1
    digest = hashlib.sha256(json.dumps(shards).encode()).hexdigest()[:12]
    return ShardPlan(shards=shards, loads=loads, sources=sources, fingerprint=digest)


def _guess_shards(sizes: Mapping[str, float], guessed: set[str], n: int) -> int:
    """The fewest shards that hold the guessed units at UNCERTAIN_FILL of the mean load."""
    mean = sum(sizes.values()) / n
    if mean <= 0:
        return n
    return min(n, max(1, math.ceil(sum(sizes[k] for k in guessed) / (UNCERTAIN_FILL * mean))))


def _lpt_apart(sizes: Mapping[str, float], guessed: set[str], n: int, k: int
               ) -> list[list[str]]:
    """The guessed units by LPT onto the first k shards, then the measured ones by LPT
    onto all of them."""
    bins: list[list[str]] = [[] for _ in range(n)]
    loads = [0.0] * n
    _lpt({key: sizes[key] for key in guessed}, bins, loads, k)
    _lpt({key: s for key, s in sizes.items() if key not in guessed}, bins, loads, n)
    return bins


def _lpt(sizes: Mapping[str, float], bins: list[list[str]], loads: list[float],
         n: int) -> None:
    """Longest unit first onto the least-loaded of the first n shards (ties: the lower
    index)."""
    heap = [(loads[i], i) for i in range(n)]
    heapq.heapify(heap)
    for key in sorted(sizes, key=lambda k: (-sizes[k], k)):
        load, i = heapq.heappop(heap)
        bins[i].append(key)
        loads[i] = load + sizes[key]
        heapq.heappush(heap, (loads[i], i))


def _refine(bins: list[list[str]], sizes: Mapping[str, float]) -> None:
    """Move or swap units out of the longest shard while that shortens it.

    Each step lowers the sorted vector of loads, so the loop ends; the cap bounds the
    time on pathological inputs.
    """
    loads = [sum(sizes[k] for k in b) for b in bins]
    eps = 1e-9 * (sum(loads) + 1.0)
    for _ in range(20 * len(bins) + len(sizes)):
        top = max(range(len(bins)), key=lambda i: (loads[i], -i))
        step = None
        for other in sorted(range(len(bins)), key=lambda i: (loads[i], i)):
            if other == top or loads[top] - loads[other] <= eps:
                continue
            step = _best_step(bins[top], bins[other], loads[top] - loads[other], sizes, eps)
            if step is not None:
                a, b = step
                _apply(bins, loads, sizes, top, other, a, b)
                break
        if step is None:
            return


def _best_step(
    src: list[str], dst: list[str], gap: float, sizes: Mapping[str, float], eps: float
) -> tuple[str, str | None] | None:
    """The move (a, None) or swap (a, b) whose transfer is nearest gap/2, in (0, gap)."""
    half = gap / 2
    best: tuple[float, str, str | None] | None = None
    dst_sorted = sorted(dst, key=lambda k: (sizes[k], k))
    dst_sizes = [sizes[k] for k in dst_sorted]
    for a in sorted(src):
        size_a = sizes[a]
        candidates: list[tuple[float, str | None]] = [(size_a, None)]
        pos = bisect.bisect_left(dst_sizes, size_a - half)
        for j in (pos - 1, pos):
            if 0 <= j < len(dst_sorted):
                candidates.append((size_a - dst_sizes[j], dst_sorted[j]))
        for moved, b in candidates:
            if eps < moved < gap - eps:
                score = abs(moved - half)
                if best is None or score < best[0] - eps:
                    best = (score, a, b)
    return None if best is None else (best[1], best[2])


def _apply(
    bins: list[list[str]], loads: list[float], sizes: Mapping[str, float],
    src: int, dst: int, a: str, b: str | None,
) -> None:
    bins[src].remove(a)
    bins[dst].append(a)
    moved = sizes[a]
    if b is not None:
        bins[dst].remove(b)
        bins[src].append(b)
        moved -= sizes[b]
    loads[src] -= moved
    loads[dst] += moved


def plan_shards(
    test_ids: Sequence[str],
    durations: Mapping[str, float],
    sibling_durations: Mapping[str, Mapping[str, float]] | None,
    n: int,
    groups: Mapping[str, str] | None = None,
) -> list[list[str]]:
    """The tests of each of the N shards (index 0 is shard 1/N)."""
    plan = make_plan(test_ids, durations, sibling_durations, n, groups)
    return [list(s) for s in plan.shards]


def select_shard(
    test_ids: Sequence[str],
    durations: Mapping[str, float],
    sibling_durations: Mapping[str, Mapping[str, float]] | None,
    n: int,
    index: int,
    groups: Mapping[str, str] | None = None,
) -> list[str]:
    """The tests of shard ``index`` (1-based, as in ``--shard index/n``)."""
    if not 1 <= index <= n:
        raise UsageError(f"shard index {index} is outside 1..{n}")
    return plan_shards(test_ids, durations, sibling_durations, n, groups)[index - 1]
