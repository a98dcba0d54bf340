"""The fusion suite's check (suites/fusion/fusion_check.py) fails on a pass that keeps its
matched count but fuses something else: another epsilon, quantisation mode or group size
(the argument audit), a lost residual update (fused vs eager), and on 2 gloo ranks an
all-reduce + norm fusion with the wrong epsilon, and a tensor-parallel block whose ranks
get the wrong rows of the merged gate/up weight (against the unsharded block). The correct
passes pass the same check (the fusion suite itself, run on every matrix)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "suites" / "fusion"))
import fusion_bugs  # noqa: E402
from fusion_check import against_unsharded, check, check_outputs, run_block  # noqa: E402

from refengine import registry  # noqa: E402
from refengine.fusion import passes  # noqa: E402
from refengine.model.blocks import decoder_layer, inputs  # noqa: E402

FP8 = torch.float8_e4m3fn


class Tol:
    atol, rtol, bitwise, source = 1e-3, 1.6e-2, False, "test"


CPU_KERNELS = registry.Registry(
    {op: ("torch", "native") for op in ("linear", "rms_norm", "add_rms_norm", "silu_and_mul",
                                        "fp8_scaled_gemm", "attention_prefill")},
    use_env=False)


def _problems(defs: Any, fp8: torch.dtype | None) -> list[str]:
    dtype = torch.bfloat16
    with registry.using(CPU_KERNELS):
        result = run_block(decoder_layer(dtype, fp8), inputs(dtype), fp8, defs)
    assert result.report.passes  # the passes ran
    return check("decoder_layer", result, Tol())


BUGS = {
    "wrong-epsilon": (fusion_bugs.WRONG_EPS, FP8, "rms_norm_quant: fused rms_norm_fp8_quant "
                      "got eps=1e-05 (pattern: 1e-06)"),
    "wrong-quant-mode": (fusion_bugs.WRONG_QUANT_MODE, FP8, "silu_mul_quant: fused "
                         "silu_and_mul_fp8_quant got mode='per_tensor_dynamic' "
                         "(pattern: 'per_token_dynamic')"),
    "wrong-group-size": (fusion_bugs.WRONG_GROUP_SIZE, FP8, "group_size=64 (pattern: 128)"),
    "dropped-residual": (fusion_bugs.DROPPED_RESIDUAL, None, "decoder_layer.residual: fused "
                         "vs eager out of tolerance"),
}


@pytest.mark.parametrize("bug", BUGS)
def test_fusion_check_rejects_the_bug(bug: str) -> None:
    defs, fp8, expected = BUGS[bug]
    problems = _problems(defs, fp8)
    assert any(expected in p for p in problems), problems


def test_bitwise_check_sees_what_the_tolerance_allows() -> None:
    # An epsilon 10x off moves a bf16 norm by less than the tolerance: within tolerance,
    # but not the same bits as the unfused path, which a composed fused kernel must give.
    dtype = torch.bfloat16
    with registry.using(CPU_KERNELS):
        good = run_block(decoder_layer(dtype, FP8), inputs(dtype), FP8, passes.PASS_DEFS)
    tampered = good.fused[0].clone()
    tampered.view(torch.int16).view(-1)[3] ^= 1  # one unit in the last place
    fused = (tampered, good.fused[1])
    assert not check_outputs("x", good.eager, fused, [], False, Tol())  # within tolerance
    problems = check_outputs("x", good.eager, fused, [], True, Tol())
    assert any("must agree bit for bit" in p for p in problems), problems
    assert not check_outputs("x", good.eager, good.fused, [], True, Tol())


def test_tensor_parallel_fusion_with_the_wrong_epsilon_fails_on_two_ranks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from refengine.fusion.tp import run_tp

    monkeypatch.setenv("REFENGINE_FUSION_PASSES", "fusion_bugs:TP_WRONG_EPS")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    ranks = run_tp(2, tmp_path, torch.bfloat16, None, CPU_KERNELS)
    # the ranks ran one thread each; the caller's environment is as it was (a leaked
    # OMP_NUM_THREADS=1 reached every harness run this worker started afterwards)
    assert "OMP_NUM_THREADS" not in os.environ
    for result in ranks:
        assert result["report"]["passes"]["all_reduce_rms_norm"] == 1  # the count is right
        problems = check_outputs("tp", (result["eager"],), (result["fused"],),
                                 result["arg_mismatches"], result["bitwise"], Tol())
        assert any("got eps=" in p and "(pattern: 1e-06)" in p for p in problems), problems


def test_a_wrong_shard_of_the_merged_gate_up_weight_fails_against_the_unsharded_block(
        tmp_path: Path) -> None:
    from refengine.fusion.tp import TP_BLOCK, run_tp

    block = "fusion_bugs:GateRowsOnlyTPMLP"
    ranks = run_tp(2, tmp_path / "bug", torch.bfloat16, None, CPU_KERNELS, block=block)
    for result in ranks:  # the hole: the shards agree with themselves, fused and eager
        assert not check_outputs("tp", (result["eager"],), (result["fused"],),
                                 result["arg_mismatches"], result["bitwise"], Tol())
    problems = against_unsharded("tp", block, ranks, Tol32())
    assert [p.split(":")[0] for p in problems] == ["tp.rank0.vs_unsharded.out",
                                                   "tp.rank1.vs_unsharded.out"], problems
    good = run_tp(2, tmp_path / "good", torch.bfloat16, None, CPU_KERNELS)
    assert against_unsharded("tp", TP_BLOCK, good, Tol32()) == []


class Tol32:
    atol, rtol, bitwise, source = 1e-5, 1.3e-6, False, "test"  # the cpu matrix's float32
