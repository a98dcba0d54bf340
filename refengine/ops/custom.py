"""The ``refengine::<op>`` torch custom ops: graph nodes that dispatch through the registry.

Each op stays one opaque node under torch.compile / FX (fusion passes pattern-match
them), with a fake implementation giving output shapes and dtypes for tracing. The
eager implementation hands each call to ``ops/dispatch.py``, where the registry (which
sits above ops and installs itself there) picks a provider per call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch
from torch.library import custom_op, register_fake

from refengine.ops import dispatch
from refengine.ops.spec import FP8_BLOCK, n_groups

Tensor = torch.Tensor
_Fake = TypeVar("_Fake", bound=Callable[..., object])


def _run(op: str, *args: object) -> Tensor:
    out: Tensor = dispatch.run(op, *args)
    return out


def _run_pair(op: str, *args: object) -> tuple[Tensor, Tensor]:
    out: tuple[Tensor, Tensor] = dispatch.run(op, *args)
    return out


def fake(name: str) -> Callable[[_Fake], _Fake]:
    """``torch.library.register_fake`` with its type: the function is returned unchanged."""

    def register(fn: _Fake) -> _Fake:
        register_fake(name, fn)
        return fn

    return register


@custom_op("refengine::linear", mutates_args=())
def linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    return _run("linear", x, weight, bias)


@fake("refengine::linear")
def _linear_fake(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@custom_op("refengine::rms_norm", mutates_args=())
def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return _run("rms_norm", x, weight, eps)


@fake("refengine::rms_norm")
def _rms_norm_fake(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@custom_op("refengine::add_rms_norm", mutates_args=("residual",))
def add_rms_norm(x: Tensor, residual: Tensor, weight: Tensor, eps: float) -> Tensor:
    return _run("add_rms_norm", x, residual, weight, eps)


@fake("refengine::add_rms_norm")
def _add_rms_norm_fake(x: Tensor, residual: Tensor, weight: Tensor, eps: float) -> Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _half_last(x: Tensor) -> Tensor:
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


@custom_op("refengine::silu_and_mul", mutates_args=())
def silu_and_mul(x: Tensor) -> Tensor:
    return _run("silu_and_mul", x)


@fake("refengine::silu_and_mul")
def _silu_and_mul_fake(x: Tensor) -> Tensor:
    return _half_last(x)


@custom_op("refengine::gelu_and_mul", mutates_args=())
def gelu_and_mul(x: Tensor, approximate: str) -> Tensor:
    return _run("gelu_and_mul", x, approximate)


@fake("refengine::gelu_and_mul")
def _gelu_and_mul_fake(x: Tensor, approximate: str) -> Tensor:
    return _half_last(x)


@custom_op("refengine::rotary_embedding", mutates_args=())
def rotary_embedding(positions: Tensor, query: Tensor, key: Tensor, cos_sin_cache: Tensor,
                     head_size: int, is_neox: bool) -> tuple[Tensor, Tensor]:
    return _run_pair("rotary_embedding", positions, query, key, cos_sin_cache,
                head_size, is_neox)


@fake("refengine::rotary_embedding")
def _rotary_embedding_fake(positions: Tensor, query: Tensor, key: Tensor,
                           cos_sin_cache: Tensor, head_size: int,
                           is_neox: bool) -> tuple[Tensor, Tensor]:
    return (query.new_empty(query.shape), key.new_empty(key.shape))


@custom_op("refengine::fp8_quant", mutates_args=())
def fp8_quant(x: Tensor, fp8_dtype: torch.dtype, mode: str, scale: Tensor | None,
              group_size: int) -> tuple[Tensor, Tensor]:
    return _run_pair("fp8_quant", x, fp8_dtype, mode, scale, group_size)


@fake("refengine::fp8_quant")
def _fp8_quant_fake(x: Tensor, fp8_dtype: torch.dtype, mode: str, scale: Tensor | None,
                    group_size: int) -> tuple[Tensor, Tensor]:
    q = x.new_empty(x.shape, dtype=fp8_dtype)
    if mode == "per_token_dynamic":
        scales_shape: tuple[int, ...] = (*x.shape[:-1], 1)
    elif mode == "block":
        scales_shape = (*x.shape[:-1], n_groups(x.shape[-1], group_size))
    else:
        scales_shape = (1,)
    return q, x.new_empty(scales_shape, dtype=torch.float32)


@custom_op("refengine::fp8_block_gemm", mutates_args=())
def fp8_block_gemm(a: Tensor, a_scales: Tensor, w: Tensor, w_scales: Tensor,
                   out_dtype: torch.dtype) -> Tensor:
    return _run("fp8_block_gemm", a, a_scales, w, w_scales, out_dtype)


@fake("refengine::fp8_block_gemm")
def _fp8_block_gemm_fake(a: Tensor, a_scales: Tensor, w: Tensor, w_scales: Tensor,
                         out_dtype: torch.dtype) -> Tensor:
    assert a_scales.shape[-1] == n_groups(a.shape[-1], FP8_BLOCK)
    return a.new_empty((*a.shape[:-1], w.shape[0]), dtype=out_dtype)


@custom_op("refengine::fp8_scaled_gemm", mutates_args=())
def fp8_scaled_gemm(a: Tensor, a_scales: Tensor, w: Tensor, w_scales: Tensor,
                    bias: Tensor | None, out_dtype: torch.dtype) -> Tensor:
    return _run("fp8_scaled_gemm", a, a_scales, w, w_scales, bias,
                out_dtype)


@fake("refengine::fp8_scaled_gemm")
def _fp8_scaled_gemm_fake(a: Tensor, a_scales: Tensor, w: Tensor, w_scales: Tensor,
                          bias: Tensor | None, out_dtype: torch.dtype) -> Tensor:
    return a.new_empty((*a.shape[:-1], w.shape[0]), dtype=out_dtype)


@custom_op("refengine::int8_scaled_gemm", mutates_args=())
def int8_scaled_gemm(a: Tensor, a_scales: Tensor, w: Tensor, w_scales: Tensor,
                     bias: Tensor | None, out_dtype: torch.dtype) -> Tensor:
    return _run("int8_scaled_gemm", a, a_scales, w, w_scales, bias,
                out_dtype)


@fake("refengine::int8_scaled_gemm")
def _int8_scaled_gemm_fake(a: Tensor, a_scales: Tensor, w: Tensor, w_scales: Tensor,
                           bias: Tensor | None, out_dtype: torch.dtype) -> Tensor:
    return a.new_empty((*a.shape[:-1], w.shape[0]), dtype=out_dtype)


@custom_op("refengine::attention_prefill", mutates_args=())
def attention_prefill(q: Tensor, k: Tensor, v: Tensor, scale: float, causal: bool) -> Tensor:
    return _run("attention_prefill", q, k, v, scale, causal)


@fake("refengine::attention_prefill")
def _attention_prefill_fake(q: Tensor, k: Tensor, v: Tensor, scale: float,
                            causal: bool) -> Tensor:
    return q.new_empty(q.shape)


@custom_op("refengine::attention_decode", mutates_args=())
def attention_decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor,
                     context_lens: Tensor, scale: float) -> Tensor:
    return _run("attention_decode", q, k_cache, v_cache,
                block_tables, context_lens, scale)


@fake("refengine::attention_decode")
def _attention_decode_fake(q: Tensor, k_cache: Tensor, v_cache: Tensor,
                           block_tables: Tensor, context_lens: Tensor,
                           scale: float) -> Tensor:
    return q.new_empty(q.shape)


@custom_op("refengine::fused_moe", mutates_args=())
def fused_moe(x: Tensor, router_logits: Tensor, w13: Tensor, w2: Tensor, top_k: int,
              renormalize: bool) -> Tensor:
    return _run("fused_moe", x, router_logits, w13, w2, top_k,
                renormalize)


@fake("refengine::fused_moe")
def _fused_moe_fake(x: Tensor, router_logits: Tensor, w13: Tensor, w2: Tensor, top_k: int,
                    renormalize: bool) -> Tensor:
    return x.new_empty(x.shape)
