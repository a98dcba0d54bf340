"""Fusion passes on model blocks: matched counts, unfused ops and inductor kernels against
the platform's expectation file; fused output against the unfused (eager) output."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from refengine.fusion import FusionBackend
from refengine.model.blocks import DecoderLayer, MoEBlock, inputs


def _dtype(platform: Any) -> torch.dtype:
    return torch.bfloat16 if "bfloat16" in platform.dtypes else torch.float32


def _platform_fp8(platform: Any) -> torch.dtype | None:
    # The backend is told the platform's fp8 dtype even for blocks without quant, so a
    # quant pass there reports 0 matches (applicable) rather than "no fp8".
    name = platform.matrix.fp8.e4m3
    return getattr(torch, name, None) if name else None


def _compile_and_compare(
    case: str,
    block: torch.nn.Module,
    args: tuple[torch.Tensor, ...],
    fp8_dtype: torch.dtype | None,
    out_dtype: torch.dtype,
    platform: Any,
    tolerance: Callable[..., Any],
    record_numerics: Callable[..., Any],
    expectations: Any,
    record_property: Callable[[str, object], None],
) -> None:
    torch._dynamo.reset()
    backend = FusionBackend(fp8_dtype=fp8_dtype or _platform_fp8(platform))
    with torch.no_grad():
        eager = block(*[a.clone() for a in args])
        fused = torch.compile(block, backend=backend, fullgraph=True)(*[a.clone() for a in args])
    record_property("torch_version", str(torch.__version__))  # xdist cannot ship TorchVersion
    # Counts first: a moved count explains a numerics difference, not the other way round.
    expectations.check(case, backend.report.as_dict(), record_property)
    for name, got, want in zip(("out", "residual"), fused, eager, strict=False):
        record_numerics(
            got,
            want,
            tolerance(out_dtype),
            op=f"fusion.{case}.{name}",
            provider="inductor",
            dtype=str(out_dtype).removeprefix("torch."),
            platform=platform.name,
        )


def test_decoder_layer(
    platform: Any, tolerance: Any, record_numerics: Any, expectations: Any, record_property: Any
) -> None:
    dtype = _dtype(platform)
    _compile_and_compare(
        f"decoder_layer_{dtype}".replace("torch.", ""),
        DecoderLayer(dtype),
        inputs(dtype),
        None,
        dtype,
        platform,
        tolerance,
        record_numerics,
        expectations,
        record_property,
    )


@pytest.mark.requires("fp8")
def test_decoder_layer_fp8(
    platform: Any,
    fp8_dtype: torch.dtype,
    tolerance: Any,
    record_numerics: Any,
    expectations: Any,
    record_property: Any,
) -> None:
    dtype = _dtype(platform)
    case = f"decoder_layer_{fp8_dtype}".replace("torch.", "")
    _compile_and_compare(
        case,
        DecoderLayer(dtype, fp8_dtype),
        inputs(dtype),
        fp8_dtype,
        dtype,
        platform,
        tolerance,
        record_numerics,
        expectations,
        record_property,
    )


def test_moe_block(
    platform: Any, tolerance: Any, record_numerics: Any, expectations: Any, record_property: Any
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
        record_numerics,
        expectations,
        record_property,
    )


@pytest.mark.requires("gloo")
def test_tensor_parallel_block(
    platform: Any,
    tolerance: Any,
    record_numerics: Any,
    expectations: Any,
    record_property: Any,
    tmp_path: Path,
) -> None:
    from refengine.fusion.tp import run_tp

    dtype = _dtype(platform)
    ranks = run_tp(2, tmp_path, dtype, _platform_fp8(platform))
    assert ranks[0]["report"] == ranks[1]["report"], "ranks compiled different graphs"
    for rank, result in enumerate(ranks):
        record_numerics(
            result["fused"],
            result["eager"],
            tolerance(dtype),
            op=f"fusion.tp_block.rank{rank}",
            provider="inductor",
            dtype=str(dtype).removeprefix("torch."),
            platform=platform.name,
        )
    torch.testing.assert_close(ranks[0]["fused"], ranks[1]["fused"], atol=0, rtol=0)
    expectations.check("tp_block_2ranks", ranks[0]["report"], record_property)
