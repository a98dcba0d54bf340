"""harness.shard.estimate: a never-timed test's duration from its id's parameters."""

from __future__ import annotations

import math

from harness.shard.estimate import features, fit
from harness.shard.plan import estimate_durations

FACTORS = {"native": 1.0, "torch": 0.5, "triton": 20.0}
SIZES = (16, 64, 256)


def _id(op: str, size: int, provider: str) -> str:
    return f"suites/kp/test_parity.py::test_parity[{op}-k{size}-bfloat16-{provider}-cpu]"


def _seconds(op: str, size: int, provider: str) -> float:
    return (2.0 if op == "gemm" else 0.2) * FACTORS[provider] * (size / 16) ** 0.5


def test_features_name_module_function_tokens_and_sizes() -> None:
    f = features(_id("gemm", 64, "torch"))
    assert {"m:suites/kp/test_parity.py", "f:suites/kp/test_parity.py::test_parity",
            "t:gemm", "t:torch", "t:k64", "p:k#@1"} <= set(f.cats)
    assert f.nums == (("n:k#", math.log1p(64)),)


def test_an_unseen_combination_is_estimated_from_its_parameters() -> None:
    timed = {_id(op, s, p): _seconds(op, s, p) for op in ("gemm", "norm") for s in SIZES
             for p in FACTORS if (op, p) != ("gemm", "triton")}
    model = fit(timed)
    assert model is not None
    unseen = _id("gemm", 256, "triton")  # never timed: the slowest test of all
    estimate = model.predict(unseen)
    assert math.isclose(estimate, _seconds("gemm", 256, "triton"), rel_tol=0.25)
    # the module median would call it ordinary
    median = sorted(timed.values())[len(timed) // 2]
    assert estimate > 10 * median
    found = estimate_durations([unseen, *timed], timed)
    assert found[unseen].source == "model"
    assert math.isclose(found[unseen].seconds, estimate)


def test_too_little_history_or_an_unknown_test_falls_back_to_the_median() -> None:
    assert fit({_id("gemm", 16, "torch"): 1.0}) is None
    timed = {_id(op, s, p): _seconds(op, s, p) for op in ("gemm", "norm") for s in SIZES
             for p in FACTORS}
    stranger = "suites/other/test_z.py::test_z"
    assert estimate_durations([stranger], timed)[stranger].source == "global"


def test_the_spread_of_a_guess_comes_from_the_residuals() -> None:
    # one test in ten runs 30x and nothing in its id says which: a guess strays far
    def test(k: int) -> str:
        name = "".join(chr(ord("a") + int(d)) for d in str(k))  # no number: no size token
        return f"suites/kp/test_parity.py::test_parity[gemm-k64-bfloat16-torch-cpu-x{name}]"

    tail = fit({test(k): 30.0 if k % 10 == 0 else 1.0 for k in range(40)})
    tight = fit({test(k): 1.1 if k % 2 else 0.9 for k in range(40)})
    assert tail is not None and tight is not None
    assert tail.cv > 1.5 and tight.cv < 0.2
