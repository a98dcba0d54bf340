"""The fusion suite's contract check of fused ops (suites/fusion/fused_contract.py) fails
a fused kernel that writes its input in place, returns another dtype, or whose fake plans
other shapes; the first passes the fused-vs-eager check (asserted), which is why the
contract check exists. Each bug is patched into refengine.fusion.fused_ops (in the ranks,
for the collective op: fusion_bugs.contract_rank_all_reduce_in_place). An eager reference
that writes what the contract does not declare, or not what it does, fails too, named as
the eager side."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "suites" / "fusion"))
from fused_contract import CASES, ContractError, check, check_on_ranks  # noqa: E402
from fusion_check import check as fusion_check  # noqa: E402
from fusion_check import run_block  # noqa: E402

from refengine import registry  # noqa: E402
from refengine.fusion import fused_ops  # noqa: E402
from refengine.model.blocks import decoder_layer, inputs  # noqa: E402

NATIVE = registry.Registry({}, use_env=False)
FP8 = torch.float8_e4m3fn


class Tol:
    atol, rtol, bitwise, source = 1e-3, 1.6e-2, False, "test"


def _case(fused_op: str, case_id: str) -> Any:
    return next(c for c in CASES if c.fused_op == fused_op and c.id == case_id)


def add_rms_norm_in_place(x: Any, residual: Any, weight: Any, eps: float) -> Any:
    # the unfused kernel's in-place residual update, on the caller's tensor
    out = fused_ops._run("add_rms_norm", x, residual, weight, eps)
    return out, residual.clone()


def rms_norm_quant_bf16_scales(x: Any, weight: Any, eps: float, *quant: Any) -> Any:
    q, scales = fused_ops._native_rms_norm_fp8_quant(x, weight, eps, *quant)
    return q, scales.to(x.dtype)


def _patch(monkeypatch: pytest.MonkeyPatch, fused_op: str, kernel: Any) -> None:
    monkeypatch.setitem(fused_ops.FUSED_KERNELS[fused_op][1], "native", kernel)


def test_a_fused_op_that_writes_its_input_passes_fused_vs_eager_but_not_the_contract(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _patch(monkeypatch, "fused_add_rms_norm", add_rms_norm_in_place)
    dtype = torch.bfloat16
    with registry.using(NATIVE):
        result = run_block(decoder_layer(dtype), inputs(dtype), None)
        assert result.report.passes["add_rms_norm"].matched == 2
        assert fusion_check("decoder_layer", result, Tol()) == []  # the hole
        for case_id in ("2d-contiguous", "3d-residual-strided"):
            with pytest.raises(ContractError, match=f"fused_add_rms_norm/{case_id}: the fused "
                               "op wrote its input 'residual', which its schema does not "
                               "declare written"):
                check(_case("fused_add_rms_norm", case_id), dtype, None, 0)


def test_a_fused_op_that_returns_another_dtype_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch(monkeypatch, "rms_norm_fp8_quant", rms_norm_quant_bf16_scales)
    with registry.using(NATIVE), pytest.raises(
            ContractError, match=r"returned output 1 dtype torch\.bfloat16, the unfused "
                                 r"computation gives torch\.float32"):
        check(_case("rms_norm_fp8_quant", "per-token-dynamic"), torch.bfloat16, FP8, 0)


def test_a_fake_that_plans_other_shapes_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def per_token_always(x: Any, fp8_dtype: Any, mode: str, group_size: int) -> Any:
        return x.new_empty(x.shape, dtype=fp8_dtype), x.new_empty((*x.shape[:-1], 1),
                                                                  dtype=torch.float32)

    monkeypatch.setattr(fused_ops, "_quant_fake", per_token_always)
    with registry.using(NATIVE), pytest.raises(
            ContractError, match=r"its fake returned output 1 shape \(9, 1\), the unfused "
                                 r"computation gives \(9, 2\)"):
        check(_case("silu_and_mul_fp8_quant", "block"), torch.bfloat16, FP8, 0)


def test_the_correct_fused_ops_keep_the_contract() -> None:
    with registry.using(NATIVE):
        for case in CASES:
            if case.world == 1:  # the collective op's: on ranks, below
                check(case, torch.bfloat16, FP8 if case.fp8 else None, 0)


BUGGY_RANK = "fusion_bugs:contract_rank_all_reduce_in_place"


def test_an_all_reduce_into_its_input_passes_one_rank_but_not_two(tmp_path: Path) -> None:
    case = _case("all_reduce_rms_norm", "2ranks")
    dtype = torch.float32  # what every platform's gloo reduces (s390x's not bf16)
    check_on_ranks(dataclasses.replace(case, world=1), dtype, None, 0, NATIVE,
                   tmp_path / "one", BUGGY_RANK)  # the hole: one rank sums to itself
    with pytest.raises(ContractError, match="all_reduce_rms_norm/2ranks: rank 0: the fused op "
                       "wrote its input 'x', which its schema does not declare written; "
                       "rank 1: the fused op wrote its input 'x'"):
        check_on_ranks(case, dtype, None, 0, NATIVE, tmp_path / "two", BUGGY_RANK)
    check_on_ranks(case, dtype, None, 0, NATIVE, tmp_path / "fixed")  # the real kernel


def test_an_eager_reference_that_writes_undeclared_or_not_as_declared_fails() -> None:
    case = _case("fused_add_rms_norm", "2d-contiguous")

    def writes_x(x: Any, residual: Any, weight: Any, eps: float) -> Any:
        x.mul_(2)
        return case.reference(x, residual, weight, eps)

    def writes_a_copy(x: Any, residual: Any, weight: Any, eps: float) -> Any:
        return case.reference(x, residual.clone(), weight, eps)

    with registry.using(NATIVE):
        with pytest.raises(ContractError, match="the eager reference wrote its input 'x', "
                           "which the contract does not declare written"):
            check(dataclasses.replace(case, reference=writes_x), torch.bfloat16, None, 0)
        with pytest.raises(ContractError, match="the eager reference left its input "
                           "'residual' other than the contract declares it written"):
            check(dataclasses.replace(case, reference=writes_a_copy), torch.bfloat16, None, 0)
        with pytest.raises(ContractError, match=r"the case declares \['residual'\] written, "
                           r"the schema \[\]"):
            check(dataclasses.replace(case, fused_writes=case.reference_writes),
                  torch.bfloat16, None, 0)
