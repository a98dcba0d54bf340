"""NaN and Inf are findings (issue 26): a bug shared by the reference and the kernel that
makes NaN on both sides once passed every numeric and bitwise check, because matching
NaNs compared as equal.

The bug here is a wrong fp8 limit in the op contract (e4m3fn's 448 taken for every
flavour): the reference and a kernel that follows it clamp to 448 and cast values of 248
and above to NaN on e4m3fnuz. The parity check now calls that case broken (the reference
made NaN), and a kernel's own NaN fails it; the fusion check fails a fused graph whose
eager and fused outputs are NaN alike."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import torch
from provider_bugs import ROOT, SUITE, tolerance

from refengine.ops import reference

sys.path.insert(0, str(SUITE))
sys.path.insert(0, str(ROOT / "suites" / "fusion"))
from fusion_check import check_outputs
from parity_cases import cases_for
from parity_check import BrokenCase, ParityError, check_case

FNUZ = torch.float8_e4m3fnuz


def _saturating_case() -> Any:
    case = next(c for c in cases_for("fp8_quant") if c.id == "static-saturates")

    def build() -> tuple[Any, ...]:
        return case.args(torch.bfloat16, FNUZ, "cpu", 0)

    return case, build


def test_a_limit_shared_by_reference_and_kernel_is_a_broken_case(
        monkeypatch: pytest.MonkeyPatch) -> None:
    case, build = _saturating_case()
    monkeypatch.setattr(reference, "fp8_max", lambda dtype: 448.0)
    q, _ = reference.fp8_quant(*build())
    assert q.float().isnan().any()  # the shared bug makes NaN on both sides
    with pytest.raises(BrokenCase, match=r"fp8_quant/static-saturates: the reference \(native\) "
                       r"made non-finite values \(output 0: \d+ NaN\)"):
        check_case("fp8_quant", build, reference.fp8_quant, tolerance, case.id, case.layout)


def test_a_kernel_that_makes_nan_fails_where_the_reference_does_not() -> None:
    case, build = _saturating_case()

    def overflows(x: Any, fp8_dtype: Any, mode: str, scale: Any, group_size: int) -> Any:
        _, s = reference.fp8_quant(x, fp8_dtype, mode, scale, group_size)
        return (x.float() / scale).to(fp8_dtype), s  # no clamp before the cast

    with pytest.raises(ParityError, match=r"output 0 \(torch.float8_e4m3fnuz\): \d+ NaN in the "
                       "result, where the op's contract allows none"):
        check_case("fp8_quant", build, overflows, tolerance, case.id, case.layout)
    check_case("fp8_quant", build, reference.fp8_quant, tolerance, case.id, case.layout)


def test_block_gemm_relative_mean_check_refuses_nan() -> None:
    case = next(c for c in cases_for("fp8_block_gemm") if c.id == "3d-k256-fp32")

    def build() -> tuple[Any, ...]:
        return case.args(torch.bfloat16, torch.float8_e4m3fn, "cpu", 0)

    def one_nan(*args: Any) -> Any:
        out = reference.fp8_block_gemm(*args)
        out.view(-1)[0] = float("nan")
        return out

    with pytest.raises(ParityError, match="1 NaN in the result"):
        check_case("fp8_block_gemm", build, one_nan, tolerance, case.id, case.layout)


def test_fusion_check_fails_nan_on_both_sides() -> None:
    eager = torch.full((4, 8), float("nan"), dtype=torch.bfloat16)
    problems = check_outputs("block", (eager,), (eager.clone(),), [], True,
                             tolerance(torch.bfloat16, "x"))
    assert problems == [f"block.out: fused vs eager out of tolerance: {p}" for p in (
        "the reference has 32 NaN (a broken case: its inputs must not make them, or the "
        "op's contract must allow them); elsewhere max abs err 0, max rel err 0, headroom 0 "
        "(atol 0.001, rtol 0.016); worst at flat index 0: got 0, expected 0",)]
