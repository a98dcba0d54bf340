"""The lane's suites over a build's shards (shard/suites.py): whole where the history times
a suite and it fits a shard's share, split test by test otherwise; the same plan from the
same file on every shard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.shard.durations import DurationSet, dump, load
from harness.shard.suites import SuiteCost, describe, plan_lane


def costs(**seconds: float) -> dict[str, SuiteCost]:
    return {name: SuiteCost(seconds=s, peak_mb=100.0 * s) for name, s in seconds.items()}


def test_small_suites_go_whole_longest_first_onto_the_least_loaded_shard() -> None:
    plan = plan_lane(["a", "b", "c", "d"], costs(a=40, b=30, c=20, d=10), 2)
    assert plan.split == ()
    assert plan.whole == {"a": 1, "b": 2, "c": 2, "d": 1}
    assert plan.loads == (50, 50)
    assert plan.peaks == (4000, 3000)  # each shard's largest suite: they run one by one
    assert plan.runs_here(1) == ["a", "d"] and plan.runs_here(2) == ["b", "c"]


def test_a_suite_longer_than_a_shards_share_is_split_on_every_shard() -> None:
    # vLLM's step: test_cpu_attn.py alone is most of the lane's time
    plan = plan_lane(["attn", "moe", "gemm", "conv"], costs(attn=6000, moe=700, gemm=500,
                                                            conv=200), 2)
    assert plan.split == ("attn",)
    assert plan.whole == {"moe": 1, "gemm": 2, "conv": 2}
    assert plan.loads == (3700, 3700)
    assert plan.runs_here(1) == ["attn", "moe"]


def test_a_suite_the_history_does_not_time_is_split_as_before() -> None:
    plan = plan_lane(["new", "old1", "old2"], costs(old1=10, old2=10), 2)
    assert plan.split == ("new",)
    assert set(plan.whole) == {"old1", "old2"}
    # no history at all: every suite split, the plan before suites went whole
    assert plan_lane(["x", "y"], {}, 3).split == ("x", "y")
    assert plan_lane(["x", "y"], costs(x=1, y=1), 1).split == ("x", "y")


def test_the_plan_depends_on_the_inputs_not_their_order() -> None:
    one = plan_lane(["d", "c", "b", "a"], costs(a=5, b=5, c=5, d=5), 3)
    two = plan_lane(["a", "b", "c", "d"], dict(reversed(costs(a=5, b=5, c=5, d=5).items())), 3)
    assert one == two
    assert one.fingerprint != plan_lane(["a", "b", "c", "d"], costs(a=9, b=5, c=5, d=5),
                                        3).fingerprint
    assert "whole here (a, d)" in describe(one, 1) and one.fingerprint in describe(one, 1)


def test_the_durations_file_carries_the_suites(tmp_path: Path) -> None:
    path = tmp_path / "lane.json"
    dump(DurationSet(matrix="vllm-kernels", durations={"t::a": 1.0},
                     suites={"attn": SuiteCost(seconds=6000.0, peak_mb=9100.0),
                             "conv": SuiteCost(seconds=20.0)}), path)
    assert load(path).suites == {"attn": SuiteCost(seconds=6000.0, peak_mb=9100.0),
                                 "conv": SuiteCost(seconds=20.0)}
    data = json.loads(path.read_text())
    data["suites"]["conv"]["seconds"] = "long"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"suites\.conv\.seconds"):
        load(path)
