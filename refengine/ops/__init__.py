"""Plain-Python entry points: ``refengine.ops.<op>(...)`` calls ``torch.ops.refengine.<op>``.

Importing this package registers the ``refengine::*`` custom ops. Signatures and the
contract of each op: refengine/ops/spec.py. The reference implementations:
refengine/ops/reference.py.
"""

from __future__ import annotations

from typing import Any

import torch

from refengine.ops import custom as _custom  # noqa: F401  (registers refengine::*)
from refengine.ops.spec import OP_NAMES, OPS, OpSpec

Tensor = torch.Tensor
_ops: Any = torch.ops.refengine  # the registered refengine::* ops; untyped in torch


def _tensor(value: Any) -> Tensor:
    out: Tensor = value
    return out


def _pair(value: Any) -> tuple[Tensor, Tensor]:
    out: tuple[Tensor, Tensor] = value
    return out


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    return _tensor(_ops.linear(x, weight, bias))



def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    return _tensor(_ops.rms_norm(x, weight, eps))


def add_rms_norm(x: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """Returns the normed output; ``residual`` becomes x + residual in place."""
    return _tensor(_ops.add_rms_norm(x, residual, weight, eps))


def silu_and_mul(x: Tensor) -> Tensor:
    return _tensor(_ops.silu_and_mul(x))


def gelu_and_mul(x: Tensor, approximate: str = "none") -> Tensor:
    return _tensor(_ops.gelu_and_mul(x, approximate))


def rotary_embedding(positions: Tensor, query: Tensor, key: Tensor, cos_sin_cache: Tensor,
                     head_size: int, is_neox: bool = True) -> tuple[Tensor, Tensor]:
    return _pair(_ops.rotary_embedding(positions, query, key, cos_sin_cache, head_size, is_neox))


def fp8_quant(x: Tensor, fp8_dtype: torch.dtype, mode: str = "per_token_dynamic",
              scale: Tensor | None = None, group_size: int = 128) -> tuple[Tensor, Tensor]:
    return _pair(_ops.fp8_quant(x, fp8_dtype, mode, scale, group_size))


def fp8_block_gemm(a: Tensor, a_scales: Tensor, w: Tensor, w_scales: Tensor,
                   out_dtype: torch.dtype = torch.bfloat16) -> Tensor:
    return _tensor(_ops.fp8_block_gemm(a, a_scales, w, w_scales, out_dtype))


def fp8_scaled_gemm(a: Tensor, a_scales: Tensor, w: Tensor, w_scales: Tensor,
                    bias: Tensor | None = None,
                    out_dtype: torch.dtype = torch.bfloat16) -> Tensor:
    return _tensor(_ops.fp8_scaled_gemm(a, a_scales, w, w_scales, bias, out_dtype))


def int8_scaled_gemm(a: Tensor, a_scales: Tensor, w: Tensor, w_scales: Tensor,
                     bias: Tensor | None = None,
                     out_dtype: torch.dtype = torch.bfloat16) -> Tensor:
    return _tensor(_ops.int8_scaled_gemm(a, a_scales, w, w_scales, bias, out_dtype))


def attention_prefill(q: Tensor, k: Tensor, v: Tensor, scale: float | None = None,
                      causal: bool = True) -> Tensor:
    return _tensor(_ops.attention_prefill(q, k, v, _scale(q, scale), causal))


def attention_decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor,
                     context_lens: Tensor, scale: float | None = None) -> Tensor:
    return _tensor(_ops.attention_decode(q, k_cache, v_cache, block_tables, context_lens,
                                 _scale(q, scale)))


def fused_moe(x: Tensor, router_logits: Tensor, w13: Tensor, w2: Tensor, top_k: int = 2,
              renormalize: bool = True) -> Tensor:
    return _tensor(_ops.fused_moe(x, router_logits, w13, w2, top_k, renormalize))


def _scale(q: Tensor, scale: float | None) -> float:
    return float(q.shape[-1]) ** -0.5 if scale is None else scale


__all__ = ["OPS", "OP_NAMES", "OpSpec", *OP_NAMES]
