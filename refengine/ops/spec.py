"""The op contracts: exact signatures, mutated arguments, output dtype and shape rules.

Every provider implements an op with exactly the Python signature written here (same
argument names and order). ``native`` (refengine/ops/reference.py) is the definition of
correct: plain torch computing in fp32 and casting to the output dtype at the end.

Conventions shared by all ops
- "T..." means any leading batch dimensions (2-D, 3-D or 4-D inputs).
- Weights follow ``F.linear``: ``weight`` is ``[N, K]`` and ``out = x @ weight.T``.
- Gate-and-up layouts put the gate FIRST: ``x[..., :d]`` is the gate, ``x[..., d:]`` the
  up projection (silu_and_mul, gelu_and_mul, and fused_moe's ``w13``).
- Scales are float32. Quantizers clamp to ``torch.finfo(fp8).max`` before the cast,
  because the fp8 flavours overflow differently (e4m3fnuz gives NaN at >= 248).
- Only arguments listed in ``mutates`` may be written; everything else must be
  bit-identical after the call.
- No NaN and no Inf in any output or written argument, unless the op's ``nonfinite``
  says its contract allows them (no op's does: inputs are finite, quantizers clamp,
  dynamic scales are floored, every query sees at least one key). The parity suite fails
  a kernel that makes one, and a case whose reference makes one is a broken case.

Signatures (argument -> meaning; return)

linear(x, weight, bias) -> out
    x [T..., K] float; weight [N, K] same dtype; bias [N] or None. out [T..., N], x.dtype.
rms_norm(x, weight, eps) -> out
    x [T..., H]; weight [H]; out = x / sqrt(mean(x^2) + eps) * weight; shape/dtype of x.
add_rms_norm(x, residual, weight, eps) -> out
    MUTATES residual: residual <- (x + residual) rounded to residual.dtype; then
    out = rms_norm(residual, weight, eps). The norm reads the ROUNDED sum, so the fused
    op equals ``r = x + residual; rms_norm(r)`` bit for bit (what fusion passes rely on).
silu_and_mul(x) -> out
    x [T..., 2d]; out [T..., d] = silu(x[..., :d]) * x[..., d:]; dtype of x.
gelu_and_mul(x, approximate) -> out
    as silu_and_mul with gelu(approximate in {"none", "tanh"}).
rotary_embedding(positions, query, key, cos_sin_cache, head_size, is_neox) -> (q, k)
    positions int64 [T...]; query [T..., Hq*D] or [T..., Hq, D]; key likewise with Hkv;
    cos_sin_cache [max_pos, rot_dim] (cos halves then sin halves), rot_dim <= head_size;
    the first rot_dim dims of each head rotate, the rest pass through. is_neox rotates
    halves, else interleaved pairs (GPT-J). Returns NEW tensors shaped like query/key
    (functional; nothing mutated).
fp8_quant(x, fp8_dtype, mode, scale, group_size) -> (q, scales)
    x [T..., K] float; mode in QUANT_MODES:
      per_tensor_static  scale given, shape [1]; scales returned = that scale.
      per_tensor_dynamic scales [1] = amax(|x|) / fp8max.
      per_token_dynamic  scales [T..., 1] = amax over the last dim / fp8max.
      block              scales [T..., ceil(K / group_size)], one per 1 x group_size
                         group along the last dim (the last group may be partial).
    q = clamp(x / scale, -fp8max, fp8max).to(fp8_dtype), shape of x. Dynamic scales are
    floored at MIN_SCALE so an all-zero row gives zeros, not NaN. group_size is only
    read in block mode.
fp8_block_gemm(a, a_scales, w, w_scales, out_dtype) -> out
    a fp8 [T..., K] with a_scales [T..., ceil(K/128)] (1x128 groups); w fp8 [N, K] with
    w_scales [ceil(N/128), ceil(K/128)] (128x128 blocks); out [T..., N] in out_dtype:
    dequantize both, multiply in fp32.
fp8_scaled_gemm(a, a_scales, w, w_scales, bias, out_dtype) -> out
    a fp8 [M, K]; a_scales [1] (per tensor) or [M, 1] (per row); w fp8 [N, K];
    w_scales [1] or [N]; bias [N] or None; out [M, N] in out_dtype.
int8_scaled_gemm(a, a_scales, w, w_scales, bias, out_dtype) -> out
    w8a8: a int8 [T..., K], a_scales [T..., 1] (per token) or [1]; w int8 [N, K],
    w_scales [N] (per channel) or [1]; bias [N] or None. The int8 dot products
    accumulate exactly in int32, then out = acc * a_scales * w_scales + bias.
attention_prefill(q, k, v, scale, causal) -> out
    q [B, S, Hq, D]; k, v [B, S, Hkv, D] with Hq % Hkv == 0 (GQA); causal masks
    key j > query i. out [B, S, Hq, D], q.dtype.
attention_decode(q, k_cache, v_cache, block_tables, context_lens, scale) -> out
    q [B, Q, Hq, D]: queries for the LAST Q positions of each sequence;
    k_cache, v_cache [num_blocks, block_size, Hkv, D] (paged); block_tables int32
    [B, max_blocks]; context_lens int32 [B] (tokens in the cache, the Q new ones
    included, >= Q). Query i of sequence b sits at position context_lens[b] - Q + i and
    sees keys 0 .. that position. out [B, Q, Hq, D], q.dtype.
fused_moe(x, router_logits, w13, w2, top_k, renormalize) -> out
    x [T, H]; router_logits [T, E]; w13 [E, 2I, H] (gate rows first, then up);
    w2 [E, H, I]. Routing: softmax over E in fp32, top_k, renormalised to sum 1 when
    renormalize. out[t] = sum_k weight_k * w2[e_k] @ silu_and_mul(w13[e_k] @ x[t]).
    out [T, H], x.dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

FP8_BLOCK = 128  # the 1x128 / 128x128 block size of fp8_block_gemm
MIN_SCALE = 1e-12  # floor of dynamic fp8 scales (times fp8max): no 0/0
QUANT_MODES = ("per_tensor_static", "per_tensor_dynamic", "per_token_dynamic", "block")
FP8_DTYPES = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")


@dataclass(frozen=True, kw_only=True)
class OpSpec:
    """What the registry and the parity suite need to know about one op."""

    name: str
    params: tuple[str, ...]
    mutates: tuple[str, ...] = ()
    # The contract allows NaN / Inf in the outputs (they must then match the reference's).
    nonfinite: bool = False
    # The dtype a provider is chosen by: activations for float ops, the fp8 flavour for
    # fp8 ops, the output dtype for int8_scaled_gemm.
    key_dtype: Callable[[Mapping[str, Any]], torch.dtype]


def _arg(name: str) -> Callable[[Mapping[str, Any]], torch.dtype]:
    def get(args: Mapping[str, Any]) -> torch.dtype:
        value = args[name]
        return value if isinstance(value, torch.dtype) else value.dtype

    return get


OPS: dict[str, OpSpec] = {
    spec.name: spec
    for spec in (
        OpSpec(name="linear", params=("x", "weight", "bias"), key_dtype=_arg("x")),
        OpSpec(name="rms_norm", params=("x", "weight", "eps"), key_dtype=_arg("x")),
        OpSpec(name="add_rms_norm", params=("x", "residual", "weight", "eps"),
               mutates=("residual",), key_dtype=_arg("x")),
        OpSpec(name="silu_and_mul", params=("x",), key_dtype=_arg("x")),
        OpSpec(name="gelu_and_mul", params=("x", "approximate"), key_dtype=_arg("x")),
        OpSpec(name="rotary_embedding",
               params=("positions", "query", "key", "cos_sin_cache", "head_size", "is_neox"),
               key_dtype=_arg("query")),
        OpSpec(name="fp8_quant", params=("x", "fp8_dtype", "mode", "scale", "group_size"),
               key_dtype=_arg("fp8_dtype")),
        OpSpec(name="fp8_block_gemm", params=("a", "a_scales", "w", "w_scales", "out_dtype"),
               key_dtype=_arg("a")),
        OpSpec(name="fp8_scaled_gemm",
               params=("a", "a_scales", "w", "w_scales", "bias", "out_dtype"),
               key_dtype=_arg("a")),
        OpSpec(name="int8_scaled_gemm",
               params=("a", "a_scales", "w", "w_scales", "bias", "out_dtype"),
               key_dtype=_arg("out_dtype")),
        OpSpec(name="attention_prefill", params=("q", "k", "v", "scale", "causal"),
               key_dtype=_arg("q")),
        OpSpec(name="attention_decode",
               params=("q", "k_cache", "v_cache", "block_tables", "context_lens", "scale"),
               key_dtype=_arg("q")),
        OpSpec(name="fused_moe",
               params=("x", "router_logits", "w13", "w2", "top_k", "renormalize"),
               key_dtype=_arg("x")),
    )
}

OP_NAMES: tuple[str, ...] = tuple(OPS)


@dataclass(frozen=True)
class CallInfo:
    """How a provider is chosen for one call: key dtype, shapes, layout, device.

    ``shapes`` maps each tensor argument to its shape and each other non-None argument
    to its value (so a provider can decide on, e.g., fp8_quant's ``mode``).
    ``layout`` is "contiguous" when every tensor argument is contiguous, else "strided".
    """

    op: str
    dtype: torch.dtype
    shapes: Mapping[str, Any]
    layout: str
    device: str = "cpu"

    def key(self) -> tuple[Any, ...]:
        return (self.op, self.dtype, tuple(sorted(self.shapes.items())), self.layout)


def bind(op: str, args: tuple[Any, ...]) -> dict[str, Any]:
    spec = OPS[op]
    if len(args) != len(spec.params):
        raise TypeError(f"{op} takes {len(spec.params)} arguments {spec.params}, got {len(args)}")
    return dict(zip(spec.params, args, strict=True))


def describe(op: str, args: tuple[Any, ...]) -> CallInfo:
    """The CallInfo of one call, the key under which the registry caches its choice."""
    bound = bind(op, args)
    shapes: dict[str, Any] = {}
    contiguous = True
    device = "cpu"
    for name, value in bound.items():
        if isinstance(value, torch.Tensor):
            shapes[name] = tuple(value.shape)
            contiguous = contiguous and value.is_contiguous()
            device = value.device.type
        elif value is not None:
            shapes[name] = value
    return CallInfo(op=op, dtype=OPS[op].key_dtype(bound), shapes=shapes,
                    layout="contiguous" if contiguous else "strided", device=device)


def fp8_max(dtype: torch.dtype) -> float:
    return float(torch.finfo(dtype).max)


def n_groups(size: int, group: int) -> int:
    return -(-size // group)
