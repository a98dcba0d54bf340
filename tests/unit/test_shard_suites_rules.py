"""The rules of a lane's suites over its shards (harness/shard/suites.py), each walked on
both sides: a suite the history times at zero seconds against one it times below zero, a
tie of planned time broken by the shard with fewer suites, the plan's record (its loads to
a tenth of a second, a fingerprint of sixteen hex digits) and the line each shard prints
of it, with and without split suites and recorded peaks."""

from __future__ import annotations

import re

from harness.shard.suites import LanePlan, SuiteCost, describe, plan_lane


def seconds(**each: float) -> dict[str, SuiteCost]:
    return {name: SuiteCost(seconds=s) for name, s in each.items()}


def mixed_plan() -> LanePlan:
    """Two shards: one suite split (no peak recorded), three whole with their own peaks."""
    return plan_lane(["big", "a", "b", "c"],
                     {"big": SuiteCost(seconds=100.0),
                      "a": SuiteCost(seconds=30.0, peak_mb=300.0),
                      "b": SuiteCost(seconds=20.0, peak_mb=200.0),
                      "c": SuiteCost(seconds=5.0)}, 2)


def test_a_suite_the_history_times_at_zero_seconds_still_goes_whole() -> None:
    plan = plan_lane(["a", "b", "y", "z"], seconds(a=5, b=5, y=0, z=0), 2)
    assert plan.split == ()
    # the zero-second suites go to the tied shard with fewer suites: one each
    assert plan.whole == {"a": 1, "b": 2, "y": 1, "z": 2}
    assert plan.loads == (5, 5)


def test_a_suite_timed_under_a_second_goes_whole_like_a_longer_one() -> None:
    plan = plan_lane(["a", "b", "quick"], seconds(a=5, b=5, quick=0.5), 2)
    assert plan.split == ()
    assert plan.whole == {"a": 1, "b": 2, "quick": 1}
    assert plan.loads == (5.5, 5)


def test_a_suite_timed_below_zero_seconds_is_not_timed_and_splits() -> None:
    plan = plan_lane(["a", "b", "odd"], seconds(a=5, b=5, odd=-0.5), 2)
    assert plan.split == ("odd",)
    assert plan.whole == {"a": 1, "b": 2}
    assert plan.loads == (5, 5)


def test_a_tie_of_planned_time_goes_to_the_shard_with_fewer_suites_not_the_lower() -> None:
    plan = plan_lane(list("abcdef"), seconds(a=4, b=3, c=3, d=1, e=1, f=1), 2)
    # after e, both shards plan 6 s: shard 1 holds a, d, e and shard 2 b, c
    assert plan.whole == {"a": 1, "b": 2, "c": 2, "d": 1, "e": 1, "f": 2}
    assert plan.loads == (6, 7)


def test_the_plan_record_gives_each_shards_load_to_a_tenth_of_a_second() -> None:
    plan = plan_lane(["x", "y"], seconds(x=3.14, y=3.14), 2)
    assert plan.as_dict(2) == {"shard": "2/2", "fingerprint": plan.fingerprint,
                               "whole": {"x": 1, "y": 2}, "split": [],
                               "loads": [3.1, 3.1]}


def test_the_fingerprint_is_sixteen_hex_digits() -> None:
    for plan in (mixed_plan(), plan_lane(["x"], {}, 1), plan_lane([], {}, 3)):
        assert re.fullmatch(r"[0-9a-f]{16}", plan.fingerprint), plan.fingerprint


def test_each_shard_describes_its_own_suites_load_and_peak_and_counts_the_others() -> None:
    plan = mixed_plan()
    assert plan.split == ("big",)
    assert plan.whole == {"a": 1, "b": 2, "c": 2}
    assert plan.loads == (80, 75) and plan.peaks == (300, 200)
    assert describe(plan, 1) == (
        "shard 1/2 of the lane's suites: 1 whole here (a); 1 split test by test on every "
        "shard (big); 2 whole on other shards; planned 80 s, peak 300 MB a test process "
        f"(plan {plan.fingerprint})")
    assert describe(plan, 2) == (
        "shard 2/2 of the lane's suites: 2 whole here (b, c); 1 split test by test on every "
        "shard (big); 1 whole on other shards; planned 75 s, peak 200 MB a test process "
        f"(plan {plan.fingerprint})")


def test_a_plan_without_split_suites_or_peaks_leaves_those_words_out() -> None:
    plan = plan_lane(["a", "b", "c"], seconds(a=2, b=2, c=2), 3)
    assert plan.split == () and plan.peaks == (None, None, None)
    assert plan.whole == {"a": 1, "b": 2, "c": 3}
    assert describe(plan, 3) == (
        "shard 3/3 of the lane's suites: 1 whole here (c); 2 whole on other shards; "
        f"planned 2 s (plan {plan.fingerprint})")


def test_a_shard_with_no_suite_of_its_own_says_none() -> None:
    plan = plan_lane(["a", "b", "big"], seconds(a=3, b=3, big=30), 3)
    assert plan.whole == {"a": 1, "b": 2} and plan.loads == (13, 13, 10)
    assert describe(plan, 3) == (
        "shard 3/3 of the lane's suites: 0 whole here (none); 1 split test by test on every "
        f"shard (big); 2 whole on other shards; planned 10 s (plan {plan.fingerprint})")
