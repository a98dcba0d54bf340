"""Shard balance: harness.shard.plan against pytest-split's least_duration, same inputs.

For each synthetic duration set (seeded) and shard count, both planners see only the
KNOWN durations; each plan is then judged with the TRUE durations:

    ratio = longest shard / max(total / N, longest unit)

1.00 is the best any plan can do. pytest-split gives an untimed test the average of
the known durations (its documented behaviour); it knows nothing of siblings.

Cases:
  all-known        every test timed on this platform
  30%-untimed      30% never timed here, but timed on a sibling platform that runs
                   2.5x faster with per-test noise (sigma 0.15 in log space)
  30%-no-sibling   30% never timed anywhere; ids carry no information (``[p3]``), so
                   ours estimates from the module (its median, or the model's module
                   effect); "id oracle" is ours told each untimed test's expected
                   seconds given its module's true scale, all such an id can tell: no
                   estimator from the id does much better. "fluid" relaxes further: the
                   timed tests divisible at will (every shard's plan met exactly), the
                   untimed ones with their true module scale onto the fewest shards that
                   hold them (or onto all), the best of a few headrooms chosen in
                   hindsight (printed per policy below the table). What is left is the
                   untimed tests' own spread (per test sigma 0.8 and 1% x30: a relative
                   standard deviation of about 3.2 per test, about 0.37 of a shard's mean
                   load for the ~19 untimed tests a shard of 16 holds), which no plan from
                   the id can know; fluid at N = 16 is about 1.12 over 200 seeds
  30%-no-sibling-params
                   30% never timed anywhere; ids name what the test does, like the
                   suites' (``[op-k<size>-dtype-provider]``); the same spread as
                   30%-no-sibling (module sigma 1, per test about sigma 0.85, 1% x30),
                   but a product of per-parameter factors (size^0.3) up to a log-noise
                   of sigma 0.3, the x30 coming from one rare slow provider, as on real
                   lanes (Triton's interpreter, compiles). Ours fits its parameter model
                   on the timed 70%; "median" is the same planner with the module median
                   instead (what it did before the model)
  groups           all known; 20% of modules must run in one process (ours only:
                   pytest-split cannot keep tests together)
  real:<run>       with --junit RUN_DIR: a real run's durations, 30% held out as untimed

Run: python bench/shard_balance.py [--seeds 20] [--tests 1000] [--junit reports/cpu/<run>]
Needs pytest-split (pip install pytest-split).
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_split.algorithms import Algorithms

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

import harness.shard.plan
from harness.shard.plan import make_plan, module_groups


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


OPS = [f"op{i}" for i in range(12)]
DTYPES = ["float32", "bfloat16", "float16"]
PROVIDERS = ["native", "fast", "compiled", "interp"]


def synth_params(seed: int, n_tests: int, untimed: float) -> Case:
    """The spread of ``synth`` (module sigma 1, per-test about sigma 0.85, 1% of tests
    x30), but with the per-test part explained by the id's parameters up to a
    log-noise of sigma 0.3."""
    rng = random.Random(seed)
    n_modules = max(1, n_tests // 20)
    module_scale = [rng.lognormvariate(0.0, 1.0) for _ in range(n_modules)]
    op_f = {op: rng.lognormvariate(0.0, 0.5) for op in OPS}
    dtype_f = {d: rng.lognormvariate(0.0, 0.2) for d in DTYPES}
    prov_f = {"native": 1.0, "fast": 0.5, "compiled": 2.0, "interp": 30.0}
    ids: list[str] = []
    true: dict[str, float] = {}
    for k in range(n_tests):
        m = rng.randrange(n_modules)
        op, dtype = rng.choice(OPS), rng.choice(DTYPES)
        prov = rng.choices(PROVIDERS, weights=[33, 33, 33, 1])[0]
        size = rng.choice([16, 32, 64, 96, 128, 200, 256, 512, 1024])
        test = f"suites/s/test_m{m:03d}.py::test_f{m % 3}[{op}-k{size}-{dtype}-{prov}-c{k}]"
        seconds = (module_scale[m] * op_f[op] * dtype_f[dtype] * prov_f[prov]
                   * (size / 128) ** 0.3 * rng.lognormvariate(0.0, 0.3))
        ids.append(test)
        true[test] = seconds
    untimed_ids = set(rng.sample(ids, int(untimed * n_tests)))
    known = {t: d for t, d in true.items() if t not in untimed_ids}
    return Case(ids=ids, true=true, known=known, siblings={}, groups={})


def real_case(seed: int, durations: dict[str, float], untimed: float) -> Case:
    rng = random.Random(seed)
    ids = sorted(durations)
    untimed_ids = set(rng.sample(ids, int(untimed * len(ids))))
    known = {t: d for t, d in durations.items() if t not in untimed_ids}
    return Case(ids=ids, true=dict(durations), known=known, siblings={}, groups={})


def real_durations(run_dir: Path) -> dict[str, float]:
    from harness.results.junit_read import read_junit

    out: dict[str, float] = {}
    for path in sorted((run_dir / "junit").glob("*.xml")):
        cases, _ = read_junit(path, lambda message: None)
        for case in cases:
            if case.status != "skipped":
                out[case.nodeid] = max(case.duration, 0.0)
    return out


def median_only(case: Case, n: int) -> list[list[str]]:
    """Ours with the module median for untimed tests (the planner before the model)."""
    saved = harness.shard.plan.estimate_durations

    def no_model(test_ids, durations, sibling_durations=None):  # type: ignore[no-untyped-def]
        import harness.shard.estimate as sm

        real_fit = sm.fit
        sm.fit = lambda d: None  # type: ignore[assignment]
        try:
            return saved(test_ids, durations, sibling_durations)
        finally:
            sm.fit = real_fit

    harness.shard.plan.estimate_durations = no_model  # type: ignore[assignment]
    try:
        return ours(case, n)
    finally:
        harness.shard.plan.estimate_durations = saved


MEAN_SPREAD = math.exp(0.8 ** 2 / 2) * (0.99 + 0.01 * 30)  # synth: E[test] / module scale
# synth's relative standard deviation of one test about its module's expected seconds
SPREAD_CV = math.sqrt(math.exp(0.8 ** 2) * (0.99 + 0.01 * 900) / MEAN_SPREAD ** 2 - 1)
FLUID_HEADROOMS = (1.0, 1.1, 1.2, 1.3, 1.5)


def _expected(case: Case, seed: int, n_tests: int) -> dict[str, float]:
    """Each untimed test's expected seconds given all its id can tell: its module's true
    scale (``synth`` draws the scales first, so they are re-drawn here)."""
    rng = random.Random(seed)
    scales = [rng.lognormvariate(0.0, 1.0) for _ in range(max(1, n_tests // 20))]
    return {t: scales[int(t.split("test_m", 1)[1][:3])] * MEAN_SPREAD
            for t in case.ids if t not in case.known}


def module_oracle(case: Case, seed: int, n_tests: int, n: int) -> list[list[str]]:
    """Ours, told each untimed test's expected seconds and spread given its module's true
    scale: planned as ours plans the model's guesses, from the best guesses an id can
    give."""
    expected = _expected(case, seed, n_tests)
    saved = harness.shard.plan.estimate_durations

    def oracle(test_ids, durations, sibling_durations=None):  # type: ignore[no-untyped-def]
        estimate = harness.shard.plan.Estimate
        return {t: estimate(seconds=expected[t], source="model", cv=SPREAD_CV)
                if t in expected else estimate(seconds=durations[t], source="history")
                for t in test_ids}

    harness.shard.plan.estimate_durations = oracle  # type: ignore[assignment]
    try:
        return ours(case, n)
    finally:
        harness.shard.plan.estimate_durations = saved


def fluid_oracle(case: Case, seed: int, n_tests: int, n: int, headroom: float,
                 spread: bool = False) -> float:
    """A relaxation that no plan from this information beats by much: the untimed tests'
    expected seconds known (the module oracle's), the timed tests divisible at will (every
    shard's plan met exactly), the untimed ones by LPT onto the fewest shards that hold
    them at ``headroom`` x their estimate (``spread``: onto every shard). Only the untimed
    tests' own spread is left. Returns the ratio (longest shard over the lower bound)."""
    expected = _expected(case, seed, n_tests)
    total = sum(case.true.values())
    planned_total = total - sum(case.true[t] for t in expected) + headroom * sum(
        expected.values())
    plan = planned_total / n  # every shard's planned load
    for k in range(n if spread else 1, n + 1):
        loads = [0.0] * k  # planned seconds of untimed tests
        truth = [0.0] * k
        heap = [(0.0, i) for i in range(k)]
        for t in sorted(expected, key=lambda t: (-expected[t], t)):
            _, i = heapq.heappop(heap)
            loads[i] += headroom * expected[t]
            truth[i] += case.true[t]
            heapq.heappush(heap, (loads[i], i))
        if max(loads) <= plan:
            break
    # a shard of untimed tests: the rest of its plan is timed, met exactly
    longest = max([plan] + [plan - loads[i] + truth[i] for i in range(k)])
    return max(longest, max(case.true.values())) / lower_bound(case, n)


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
    "30%-no-sibling-params": None,
    "groups": dict(untimed=0.0, sibling=False, grouped=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--shards", default="4,8,16")
    parser.add_argument("--junit", type=Path, metavar="RUN_DIR",
                        help="also a real run folder's durations, 30%% held out")
    args = parser.parse_args()
    counts = [int(x) for x in args.shards.split(",")]
    print(f"{args.tests} tests, {args.seeds} seeds; ratio = longest shard / lower bound "
          "(true durations); median and worst over seeds")
    print(f"{'case':<24}{'N':>4}  {'ours med':>9}{'ours max':>9}  {'median med':>10}"
          f"{'id oracle':>10}{'fluid':>7}  {'split med':>9}{'split max':>10}  {'ours ms':>8}")
    cases: dict[str, Any] = dict(CASES)
    real: dict[str, float] = {}
    fluid_notes: list[str] = []
    if args.junit:
        real = real_durations(args.junit)
        cases[f"real:{args.junit.name[:15]}({len(real)})"] = "real"
    for name, params in cases.items():
        for n in counts:
            r_ours: list[float] = []
            r_median: list[float] = []
            r_oracle: list[float] = []
            r_split: list[float] = []
            r_fluid: dict[str, list[float]] = {}
            elapsed = 0.0
            for seed in range(args.seeds):
                if params is None:
                    case = synth_params(seed, args.tests, 0.3)
                elif params == "real":
                    case = real_case(seed, real, 0.3)
                else:
                    case = synth(seed, args.tests, **params)
                bound = lower_bound(case, n)
                if params is None or params == "real" or name == "30%-no-sibling":
                    r_median.append(judge(median_only(case, n), case.true) / bound)
                if name == "30%-no-sibling":
                    r_oracle.append(judge(module_oracle(case, seed, args.tests, n),
                                          case.true) / bound)
                    r_fluid.setdefault("spread over all shards", []).append(
                        fluid_oracle(case, seed, args.tests, n, 1.0, spread=True))
                    for h in FLUID_HEADROOMS:
                        r_fluid.setdefault(f"fewest shards, headroom {h}", []).append(
                            fluid_oracle(case, seed, args.tests, n, h))
                start = time.perf_counter()
                mine = ours(case, n)
                elapsed += time.perf_counter() - start
                assert sorted(t for s in mine for t in s) == sorted(case.ids)
                r_ours.append(judge(mine, case.true) / bound)
                if not case.groups:
                    r_split.append(judge(pytest_split(case, n), case.true) / bound)
            split_med = f"{statistics.median(r_split):9.3f}" if r_split else f"{'n/a':>9}"
            split_max = f"{max(r_split):10.3f}" if r_split else f"{'n/a':>10}"
            med = f"{statistics.median(r_median):10.3f}" if r_median else f"{'-':>10}"
            oracle = f"{statistics.median(r_oracle):10.3f}" if r_oracle else f"{'-':>10}"
            medians = {policy: statistics.median(r) for policy, r in r_fluid.items()}
            fluid = f"{min(medians.values()):7.3f}" if medians else f"{'-':>7}"
            print(f"{name:<24}{n:>4}  {statistics.median(r_ours):9.3f}{max(r_ours):9.3f}  "
                  f"{med}{oracle}{fluid}  {split_med}{split_max}  "
                  f"{1000 * elapsed / args.seeds:8.1f}")
            if medians:
                fluid_notes.append(f"  N={n}: " + ", ".join(
                    f"{policy} {m:.3f}" for policy, m in medians.items()))
    if fluid_notes:
        print("fluid (30%-no-sibling), median ratio per policy; the column is the best of them,"
              " chosen in hindsight:")
        print("\n".join(fluid_notes))


if __name__ == "__main__":
    main()
