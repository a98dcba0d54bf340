"""Fusion passes on model blocks, with the platform's kernels installed (conftest.py):
matched counts, unfused ops and inductor kernels against the platform's expectation file;
each fused node's arguments against the pattern it replaced; the fused output against the
unfused (eager) output under the platform's tolerance, and bit for bit where every fused
kernel composes the unfused ops (fusion_check.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from fusion_check import against_unsharded, check, check_outputs, raise_problems, run_block

import refengine.ops as R
from refengine.model.blocks import EPS, HIDDEN, MoEBlock, decoder_layer, inputs


def _dtype(platform: Any) -> torch.dtype:
    return torch.bfloat16 if "bfloat16" in platform.dtypes else torch.float32


def _platform_fp8(platform: Any) -> torch.dtype | None:
    # The backend is told the platform's fp8 dtype even for blocks without quant, so a
    # quant pass there reports 0 matches (applicable) rather than "no fp8".
    name = platform.matrix.fp8.e4m3
    return getattr(torch, name, None) if name else None


def _recorder(case: str, out_dtype: torch.dtype,
              record_property: Callable[[str, object], None]) -> Callable[..., None]:
    def record(name: str, cmp: Any, tol: Any) -> None:
        prefix = f"fusion.{case}.{name}"
        record_property(f"{prefix}.max_abs_err", f"{cmp.max_abs_err:.6g}")
        record_property(f"{prefix}.headroom", f"{cmp.headroom:.4g}")
        if name == "out":  # the plugin's per-test numerics properties (docs/contracts.md)
            for key, value in (("op", prefix), ("provider", "platform"),
                               ("dtype", str(out_dtype).removeprefix("torch.")),
                               ("max_abs_err", f"{cmp.max_abs_err:.6g}"),
                               ("max_rel_err", f"{cmp.max_rel_err:.6g}"),
                               ("atol", f"{tol.atol:g}"), ("rtol", f"{tol.rtol:g}"),
                               ("headroom", f"{cmp.headroom:.4g}")):
                record_property(key, value)
    return record


def _compile_and_compare(
    case: str,
    block: torch.nn.Module,
    args: tuple[torch.Tensor, ...],
    fp8_dtype: torch.dtype | None,
    out_dtype: torch.dtype,
    platform: Any,
    tolerance: Callable[..., Any],
    expectations: Any,
    record_property: Callable[[str, object], None],
) -> None:
    result = run_block(block, args, fp8_dtype or _platform_fp8(platform))
    record_property("torch_version", str(torch.__version__))  # xdist cannot ship TorchVersion
    # Counts first: a moved count explains a numerics difference, not the other way round.
    expectations.check(case, result.report.as_dict(), record_property)
    raise_problems(check(case, result, tolerance(out_dtype),
                         _recorder(case, out_dtype, record_property)))


def test_decoder_layer(
    platform: Any, tolerance: Any, expectations: Any, record_property: Any
) -> None:
    dtype = _dtype(platform)
    _compile_and_compare(
        f"decoder_layer_{dtype}".replace("torch.", ""),
        decoder_layer(dtype),
        inputs(dtype),
        None,
        dtype,
        platform,
        tolerance,
        expectations,
        record_property,
    )


@pytest.mark.requires("fp8")
def test_decoder_layer_fp8(
    platform: Any,
    fp8_dtype: torch.dtype,
    tolerance: Any,
    expectations: Any,
    record_property: Any,
) -> None:
    dtype = _dtype(platform)
    case = f"decoder_layer_{fp8_dtype}".replace("torch.", "")
    _compile_and_compare(
        case,
        decoder_layer(dtype, fp8_dtype),
        inputs(dtype),
        fp8_dtype,
        dtype,
        platform,
        tolerance,
        expectations,
        record_property,
    )


def test_moe_block(
    platform: Any, tolerance: Any, expectations: Any, record_property: Any
) -> None:
    dtype = _dtype(platform)
    _compile_and_compare(
        "moe_block",
        MoEBlock(dtype),
        inputs(dtype),
        None,
        dtype,
        platform,
        tolerance,
        expectations,
        record_property,
    )


class _AddNormGuards(torch.nn.Module):
    """Two add + norm shapes the add_rms_norm pass must leave alone (its extra check): a
    float32 residual stream under lower-precision activations (the add promotes, the fused
    kernel takes one dtype), and a norm weight computed in the graph after the add
    (Gemma's 1 + w), which the fused node, placed at the add, could not see yet."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(3)
        weight = 1.0 + 0.1 * torch.randn(HIDDEN, generator=gen)
        self.ln = torch.nn.Parameter(weight.to(dtype), requires_grad=False)
        self.ln32 = torch.nn.Parameter(weight.clone(), requires_grad=False)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, ...]:
        wide = R.rms_norm(x + residual.float(), self.ln32, EPS)
        gemma = R.rms_norm(x + residual, self.ln - 0.5 + 0.5, EPS)
        return wide, gemma


def test_add_norm_pass_leaves_what_it_cannot_fuse(platform: Any, tolerance: Any,
                                                   record_property: Any) -> None:
    dtype = _dtype(platform)
    result = run_block(_AddNormGuards(dtype), inputs(dtype), _platform_fp8(platform))
    record_property("torch_version", str(torch.__version__))
    problems = check("add_norm_guards", result, tolerance(dtype))
    fused = result.report.passes.get("add_rms_norm")
    mixed = dtype != torch.float32  # in float32 the "wide" residual is the same dtype
    if fused is not None and fused.applicable and fused.matched > (0 if mixed else 1):
        problems.append(f"add_norm_guards: add_rms_norm fused {fused.matched} pattern(s) "
                        "it must leave alone")
    raise_problems(problems)


def _record_unsharded(record_property: Callable[[str, object], None]) -> Callable[..., None]:
    def record(name: str, cmp: Any, tol: Any) -> None:
        record_property("fusion.tp_block_2ranks.vs_unsharded.max_abs_err",
                        f"{cmp.max_abs_err:.6g}")
        record_property("fusion.tp_block_2ranks.vs_unsharded.headroom", f"{cmp.headroom:.4g}")
    return record


@pytest.mark.requires("gloo")
def test_tensor_parallel_block(
    platform: Any,
    tolerance: Any,
    expectations: Any,
    record_property: Any,
    platform_registry: Any,
    tmp_path: Path,
) -> None:
    from refengine.fusion.tp import TP_BLOCK, run_tp

    dtype = _dtype(platform)
    ranks = run_tp(2, tmp_path, dtype, _platform_fp8(platform), platform_registry)
    assert ranks[0]["report"] == ranks[1]["report"], "ranks compiled different graphs"
    expectations.check("tp_block_2ranks", ranks[0]["report"], record_property)
    problems: list[str] = []
    for rank, result in enumerate(ranks):
        case = f"tp_block_2ranks.rank{rank}"
        problems += check_outputs(case, (result["eager"],), (result["fused"],),
                                  result["arg_mismatches"], result["bitwise"], tolerance(dtype),
                                  _recorder(case, dtype, record_property))
    if not torch.equal(ranks[0]["fused"], ranks[1]["fused"]):
        problems.append("tp_block_2ranks: the ranks' fused outputs differ after the all-reduce")
    problems += against_unsharded("tp_block_2ranks", TP_BLOCK, ranks, tolerance(torch.float32),
                                  _record_unsharded(record_property))
    raise_problems(problems)
