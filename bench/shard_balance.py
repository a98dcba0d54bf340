"""Shard balance: harness.shard against pytest-split's least_duration, same inputs.

For each synthetic duration set (seeded) and shard count, both planners see only the
KNOWN durations; each plan is then judged with the TRUE durations:

    ratio = longest shard / max(total / N, longest unit)

1.00 is the best any plan can do. pytest-split gives an untimed test the average of
the known durations (its documented behaviour); it knows nothing of siblings.

Cases:
  all-known        every test timed on this platform
  30%-untimed      30% never timed here, but timed on a sibling platform that runs
                   2.5x faster with per-test noise (sigma 0.15 in log space)
  30%-no-sibling   30% never timed anywhere (ours falls back to the module median)
  groups           all known; 20% of modules must run in one process (ours only:
                   pytest-split cannot keep tests together)

Run: python bench/shard_balance.py [--seeds 20] [--tests 1000]
Needs pytest-split (pip install pytest-split).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_split.algorithms import Algorithms

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from harness.shard import make_plan, module_groups


@dataclass
class Case:
    ids: list[str]
    true: dict[str, float]
    known: dict[str, float]
    siblings: dict[str, dict[str, float]]
    groups: dict[str, str]


@dataclass
class _Item:  # the one attribute pytest-split reads from a pytest item
    nodeid: str


def synth(seed: int, n_tests: int, untimed: float, sibling: bool, grouped: bool) -> Case:
    rng = random.Random(seed)
    n_modules = max(1, n_tests // 20)
    # Tests of one module resemble each other: a module scale times a per-test spread.
    scales = [rng.lognormvariate(0.0, 1.0) for _ in range(n_modules)]
    ids: list[str] = []
    true: dict[str, float] = {}
    for k in range(n_tests):
        m = rng.randrange(n_modules)
        test = f"suites/s/test_m{m:03d}.py::test_{k}[p{k % 7}]"
        seconds = scales[m] * rng.lognormvariate(0.0, 0.8)
        if rng.random() < 0.01:  # a few very long tests (model loads, big shapes)
            seconds *= 30
        ids.append(test)
        true[test] = seconds
    untimed_ids = set(rng.sample(ids, int(untimed * n_tests)))
    known = {t: d for t, d in true.items() if t not in untimed_ids}
    siblings: dict[str, dict[str, float]] = {}
    if sibling:
        speed = 2.5
        siblings["sibling"] = {t: d / speed * rng.lognormvariate(0.0, 0.15)
                               for t, d in true.items()}
    groups: dict[str, str] = {}
    if grouped:
        modules = sorted({t.split("::")[0] for t in ids})
        chosen = set(rng.sample(modules, max(1, len(modules) // 5)))
        groups = module_groups(ids, [t for t in ids if t.split("::")[0] in chosen])
    return Case(ids=ids, true=true, known=known, siblings=siblings, groups=groups)


def lower_bound(case: Case, n: int) -> float:
    units: dict[str, float] = {}
    for t in case.ids:
        key = case.groups.get(t, t)
        units[key] = units.get(key, 0.0) + case.true[t]
    return max(sum(units.values()) / n, max(units.values()))


def judge(shards: list[list[str]], true: Mapping[str, float]) -> float:
    return max(sum(true[t] for t in s) for s in shards)


def ours(case: Case, n: int) -> list[list[str]]:
    plan = make_plan(case.ids, case.known, case.siblings, n, case.groups or None)
    return [list(s) for s in plan.shards]


def pytest_split(case: Case, n: int) -> list[list[str]]:
    items = [_Item(t) for t in case.ids]
    groups = Algorithms.least_duration.value(n, items, dict(case.known))  # type: ignore[arg-type]
    return [[it.nodeid for it in g.selected] for g in groups]


CASES = {
    "all-known": dict(untimed=0.0, sibling=False, grouped=False),
    "30%-untimed": dict(untimed=0.3, sibling=True, grouped=False),
    "30%-no-sibling": dict(untimed=0.3, sibling=False, grouped=False),
    "groups": dict(untimed=0.0, sibling=False, grouped=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--shards", default="4,8,16")
    args = parser.parse_args()
    counts = [int(x) for x in args.shards.split(",")]
    print(f"{args.tests} tests, {args.seeds} seeds; ratio = longest shard / lower bound "
          "(true durations); median and worst over seeds")
    print(f"{'case':<16}{'N':>4}  {'ours med':>9}{'ours max':>9}  "
          f"{'split med':>9}{'split max':>10}  {'ours ms':>8}")
    for name, params in CASES.items():
        for n in counts:
            r_ours: list[float] = []
            r_split: list[float] = []
            elapsed = 0.0
            for seed in range(args.seeds):
                case = synth(seed, args.tests, **params)  # type: ignore[arg-type]
                bound = lower_bound(case, n)
                start = time.perf_counter()
                mine = ours(case, n)
                elapsed += time.perf_counter() - start
                assert sorted(t for s in mine for t in s) == sorted(case.ids)
                r_ours.append(judge(mine, case.true) / bound)
                if not case.groups:
                    r_split.append(judge(pytest_split(case, n), case.true) / bound)
            split_med = f"{statistics.median(r_split):9.3f}" if r_split else f"{'n/a':>9}"
            split_max = f"{max(r_split):10.3f}" if r_split else f"{'n/a':>10}"
            print(f"{name:<16}{n:>4}  {statistics.median(r_ours):9.3f}{max(r_ours):9.3f}  "
                  f"{split_med}{split_max}  {1000 * elapsed / args.seeds:8.1f}")


if __name__ == "__main__":
    main()
