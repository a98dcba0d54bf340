"""The shapes and layouts each op is checked on.

A case builds the op's full argument tuple from a seeded generator, so building it
twice gives bit-identical tensors with identical strides: the reference, the provider
call and the repeat call each get their own untouched copy. Shapes are odd on purpose
(not multiples of 8 or 128), include 3-D / 4-D inputs, and strided variants: a
transposed weight, an activation sliced out of a wider buffer; plus an engine-aligned
GEMM, where vendor libraries switch to their blocked / packed kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from refengine.ops import reference
from refengine.ops.domains import LARGE_EPS
from refengine.ops.spec import FP8_BLOCK, fp8_max, n_groups

Builder = Callable[[torch.dtype, torch.dtype | None, str, torch.Generator], tuple[Any, ...]]
FP8_OPS = ("fp8_quant", "fp8_block_gemm", "fp8_scaled_gemm")


@dataclass(frozen=True)
class Case:
    op: str
    id: str
    build: Builder
    layout: str = "contiguous"  # what the id promises; checked against the built args

    def args(self, dtype: torch.dtype, fp8: torch.dtype | None, device: str,
             seed: int) -> tuple[Any, ...]:
        gen = torch.Generator().manual_seed(seed)
        return self.build(dtype, fp8, device, gen)


def _randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32,
           device: str = "cpu", scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=gen) * scale).to(device=device, dtype=dtype)


def _wide_then_slice(gen: torch.Generator, rows: tuple[int, ...], cols: int, dtype: torch.dtype,
                     device: str) -> torch.Tensor:
    """[*rows, cols] viewed out of a buffer with a wider last dim: non-contiguous rows."""
    return _randn(gen, *rows, cols + 37, dtype=dtype, device=device)[..., 3:cols + 3]


# -- float ops ------------------------------------------------------------------------------

def _linear(m: tuple[int, ...], k: int, n: int, bias: bool, w_t: bool = False,
            x_strided: bool = False) -> Builder:
    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        x = (_wide_then_slice(g, m, k, dt, dev) if x_strided
             else _randn(g, *m, k, dtype=dt, device=dev))
        w = (_randn(g, k, n, dtype=dt, device=dev, scale=k ** -0.5).t() if w_t
             else _randn(g, n, k, dtype=dt, device=dev, scale=k ** -0.5))
        b = _randn(g, n, dtype=dt, device=dev) if bias else None
        return x, w, b
    return build


def _norm(shape: tuple[int, ...], strided: bool = False, residual: bool = False,
          eps: float | None = None) -> Builder:
    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        h = shape[-1]
        x = (_wide_then_slice(g, shape[:-1], h, dt, dev) if strided
             else _randn(g, *shape, dtype=dt, device=dev))
        w = _randn(g, h, dtype=dt, device=dev, scale=0.5) + 1
        if residual:
            return x, _randn(g, *shape, dtype=dt, device=dev), w, eps or 1e-6
        return x, w, eps or 1e-5
    return build


def _gated(shape: tuple[int, ...], approximate: str | None = None,
           strided: bool = False) -> Builder:
    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        x = (_wide_then_slice(g, shape[:-1], shape[-1], dt, dev) if strided
             else _randn(g, *shape, dtype=dt, device=dev, scale=2.0))
        return (x,) if approximate is None else (x, approximate)
    return build


def _rope(lead: tuple[int, ...], hq: int, hkv: int, d: int, rot: int, neox: bool,
          split_heads: bool = False, strided: bool = False) -> Builder:
    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        max_pos = 97
        positions = torch.randint(0, max_pos, lead, generator=g).to(dev)
        inv = 1.0 / (10000 ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot))
        freqs = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv)
        cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(device=dev, dtype=dt)
        if split_heads:
            q = _randn(g, *lead, hq, d, dtype=dt, device=dev)
            k = _randn(g, *lead, hkv, d, dtype=dt, device=dev)
        elif strided:
            q = _wide_then_slice(g, lead, hq * d, dt, dev)
            k = _wide_then_slice(g, lead, hkv * d, dt, dev)
        else:
            q = _randn(g, *lead, hq * d, dtype=dt, device=dev)
            k = _randn(g, *lead, hkv * d, dtype=dt, device=dev)
        return positions, q, k, cache, d, neox
    return build


# -- quantized ops --------------------------------------------------------------------------

def _quant(shape: tuple[int, ...], mode: str, strided: bool = False, scale: float = 1.0,
           static: float | None = None, zero_row: bool = False) -> Builder:
    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        x = (_wide_then_slice(g, shape[:-1], shape[-1], torch.bfloat16, dev) if strided
             else _randn(g, *shape, dtype=torch.bfloat16, device=dev, scale=scale))
        if zero_row:  # a padding token: dynamic scales must floor, not divide by zero
            x.view(-1, shape[-1])[1].zero_()
        s = torch.tensor([static], device=dev) if static is not None else None
        return x, fp8, mode, s, FP8_BLOCK
    return build


def quantize_weight_blocks(w: torch.Tensor, fp8: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """128x128-block quantization of a [N, K] weight (what checkpoints ship)."""
    n, k = w.shape
    bn, bk = n_groups(n, FP8_BLOCK), n_groups(k, FP8_BLOCK)
    padded = torch.nn.functional.pad(w.float(), (0, bk * FP8_BLOCK - k, 0, bn * FP8_BLOCK - n))
    blocks = padded.reshape(bn, FP8_BLOCK, bk, FP8_BLOCK)
    scales = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / fp8_max(fp8)
    full = reference.expand_block_scales(scales, n, k, FP8_BLOCK, FP8_BLOCK)
    q = (w.float() / full).clamp(-fp8_max(fp8), fp8_max(fp8)).to(fp8)
    return q, scales


def _block_gemm(m: tuple[int, ...], k: int, n: int, out: torch.dtype) -> Builder:
    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        a, a_s = reference.fp8_quant(_randn(g, *m, k, device=dev), fp8, "block", None,
                                     FP8_BLOCK)
        w, w_s = quantize_weight_blocks(_randn(g, n, k, device=dev, scale=0.05), fp8)
        return a, a_s, w, w_s, out
    return build


def _scaled_gemm(m: int, k: int, n: int, per_row: bool, bias: bool,
                 out: torch.dtype, per_channel: bool | None = None) -> Builder:
    """``per_row``: per-token activation scales [M, 1], else one [1]; ``per_channel``
    (default: as ``per_row``): weight scales [N], else one [1]."""
    w_per_channel = per_row if per_channel is None else per_channel

    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        mode = "per_token_dynamic" if per_row else "per_tensor_dynamic"
        a, a_s = reference.fp8_quant(_randn(g, m, k, device=dev), fp8, mode, None, FP8_BLOCK)
        wf = _randn(g, n, k, device=dev, scale=0.05)
        if w_per_channel:
            w_s = wf.abs().amax(dim=-1) / fp8_max(fp8)
        else:
            w_s = (wf.abs().amax() / fp8_max(fp8)).reshape(1)
        w = (wf / w_s.reshape(-1, 1)).clamp(-fp8_max(fp8), fp8_max(fp8)).to(fp8)
        b = _randn(g, n, dtype=out, device=dev) if bias else None
        return a, a_s, w, w_s, b, out
    return build


def _int8_gemm(m: tuple[int, ...], k: int, n: int, per_token: bool, bias: bool,
               w_t: bool = False, per_channel: bool = True) -> Builder:
    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        a = torch.randint(-127, 128, (*m, k), generator=g, dtype=torch.int8).to(dev)
        if w_t:
            w = torch.randint(-127, 128, (k, n), generator=g, dtype=torch.int8).to(dev).t()
        else:
            w = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8).to(dev)
        a_s = (torch.rand(*m, 1, generator=g) * 1e-3 if per_token
               else torch.rand(1, generator=g) * 1e-3).to(dev)
        w_s = (torch.rand(n if per_channel else 1, generator=g) * 1e-2).to(dev)
        b = _randn(g, n, dtype=dt, device=dev) if bias else None
        return a, a_s, w, w_s, b, dt
    return build


# -- attention and MoE ----------------------------------------------------------------------

def _prefill(b: int, s: int, hq: int, hkv: int, d: int, causal: bool,
             strided: bool = False, scale: float | None = None) -> Builder:
    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        if strided:  # q, k, v as views of one fused qkv projection output
            qkv = _randn(g, b, s, hq + 2 * hkv, d, dtype=dt, device=dev)
            q, k, v = qkv.split((hq, hkv, hkv), dim=2)
        else:
            q = _randn(g, b, s, hq, d, dtype=dt, device=dev)
            k = _randn(g, b, s, hkv, d, dtype=dt, device=dev)
            v = _randn(g, b, s, hkv, d, dtype=dt, device=dev)
        return q, k, v, d ** -0.5 if scale is None else scale, causal
    return build


def _decode(lens: tuple[int, ...], n_new: int, hq: int, hkv: int, d: int,
            block_size: int, scale: float | None = None) -> Builder:
    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        max_blocks = max(n_groups(n, block_size) for n in lens)
        num_blocks = len(lens) * max_blocks + 3
        k_cache = _randn(g, num_blocks, block_size, hkv, d, dtype=dt, device=dev)
        v_cache = _randn(g, num_blocks, block_size, hkv, d, dtype=dt, device=dev)
        # Blocks scattered over the cache in a random order, as an allocator leaves them.
        perm = torch.randperm(num_blocks, generator=g)[: len(lens) * max_blocks]
        tables = perm.reshape(len(lens), max_blocks).to(torch.int32).to(dev)
        q = _randn(g, len(lens), n_new, hq, d, dtype=dt, device=dev)
        ctx = torch.tensor(lens, dtype=torch.int32, device=dev)
        return q, k_cache, v_cache, tables, ctx, d ** -0.5 if scale is None else scale
    return build


def _moe(t: int, h: int, inter: int, e: int, top_k: int, renorm: bool) -> Builder:
    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        x = _randn(g, t, h, dtype=dt, device=dev)
        logits = _randn(g, t, e, dtype=dt, device=dev)
        w13 = _randn(g, e, 2 * inter, h, dtype=dt, device=dev, scale=h ** -0.5)
        w2 = _randn(g, e, h, inter, dtype=dt, device=dev, scale=inter ** -0.5)
        return x, logits, w13, w2, top_k, renorm
    return build


CASES: tuple[Case, ...] = (
    Case("linear", "2d-odd-bias", _linear((7,), 67, 45, True)),
    Case("linear", "3d-nobias", _linear((2, 5), 64, 33, False)),
    Case("linear", "weight-transposed", _linear((9,), 40, 24, True, w_t=True), "strided"),
    Case("linear", "x-strided", _linear((3, 4), 52, 20, False, x_strided=True), "strided"),
    # engine-aligned sizes, where vendor GEMMs take their blocked / packed fast paths
    Case("linear", "aligned-k256-n512", _linear((32,), 256, 512, False)),
    Case("rms_norm", "2d-odd", _norm((7, 130))),
    Case("rms_norm", "4d", _norm((2, 3, 5, 64))),
    Case("rms_norm", "x-strided", _norm((9, 96), strided=True), "strided"),
    Case("add_rms_norm", "2d-odd", _norm((7, 130), residual=True)),
    Case("add_rms_norm", "3d", _norm((2, 5, 96), residual=True)),
    Case("silu_and_mul", "2d-odd", _gated((7, 74))),
    Case("silu_and_mul", "4d", _gated((2, 3, 4, 96))),
    Case("silu_and_mul", "x-strided", _gated((5, 150), strided=True), "strided"),
    Case("gelu_and_mul", "none-2d", _gated((7, 74), "none")),
    Case("gelu_and_mul", "tanh-3d", _gated((2, 5, 96), "tanh")),
    Case("rotary_embedding", "neox-flat", _rope((11,), 4, 2, 64, 64, True)),
    Case("rotary_embedding", "gptj-partial-3d", _rope((2, 5), 3, 1, 64, 32, False,
                                                      split_heads=True)),
    Case("rotary_embedding", "neox-strided", _rope((6,), 2, 2, 32, 32, True, strided=True),
         "strided"),
    Case("fp8_quant", "per-tensor-static", _quant((7, 67), "per_tensor_static", static=0.02)),
    Case("fp8_quant", "per-tensor-dynamic-3d", _quant((2, 5, 64), "per_tensor_dynamic")),
    Case("fp8_quant", "per-token-dynamic", _quant((9, 100), "per_token_dynamic")),
    Case("fp8_quant", "block-k200", _quant((5, 200), "block")),
    Case("fp8_quant", "block-strided", _quant((3, 130), "block", strided=True), "strided"),
    Case("fp8_quant", "static-saturates", _quant((4, 64), "per_tensor_static", scale=500.0,
                                                 static=1.0)),
    Case("fp8_block_gemm", "k200-n130-bf16", _block_gemm((5,), 200, 130, torch.bfloat16)),
    Case("fp8_block_gemm", "3d-k256-fp32", _block_gemm((2, 3), 256, 96, torch.float32)),
    Case("fp8_scaled_gemm", "per-tensor", _scaled_gemm(7, 64, 48, False, False, torch.bfloat16)),
    Case("fp8_scaled_gemm", "per-row-bias", _scaled_gemm(9, 96, 32, True, True, torch.bfloat16)),
    Case("int8_scaled_gemm", "per-token-bias", _int8_gemm((7,), 67, 45, True, True)),
    Case("int8_scaled_gemm", "3d-per-tensor", _int8_gemm((2, 9), 64, 24, False, False)),
    Case("int8_scaled_gemm", "weight-transposed", _int8_gemm((17,), 32, 16, True, False,
                                                             w_t=True), "strided"),
    Case("attention_prefill", "causal-gqa", _prefill(2, 9, 4, 2, 32, True)),
    Case("attention_prefill", "noncausal-mha", _prefill(1, 17, 2, 2, 64, False)),
    Case("attention_prefill", "qkv-strided", _prefill(2, 7, 4, 1, 32, True, strided=True),
         "strided"),
    Case("attention_decode", "single-token", _decode((5, 33, 17), 1, 4, 2, 32, 16)),
    Case("attention_decode", "multi-token", _decode((9, 40), 3, 2, 1, 64, 8)),
    Case("fused_moe", "top2-renorm", _moe(7, 64, 48, 4, 2, True)),
    Case("fused_moe", "top3-8experts", _moe(13, 32, 40, 8, 3, False)),
    # Argument values the cases above never set (refengine/ops/domains.py declares them;
    # test_coverage.py fails when a provider misses one): an epsilon large enough to move
    # the norm, rows wider than one Triton block (the second tile's offset), reductions
    # long enough for a half-precision accumulator to lose the sum, the scale shapes the
    # scaled GEMMs accept in every pairing, a softmax scale that is not 1/sqrt(d), top-1.
    Case("linear", "large-k", _linear((4,), 4096, 16, True)),
    Case("rms_norm", "multi-tile-eps-large", _norm((3, 4300), eps=LARGE_EPS)),
    Case("add_rms_norm", "multi-tile-strided-eps-large",
         _norm((3, 4300), strided=True, residual=True, eps=LARGE_EPS), "strided"),
    Case("silu_and_mul", "multi-tile", _gated((3, 2 * 4200))),
    Case("gelu_and_mul", "tanh-strided", _gated((5, 150), "tanh", strided=True), "strided"),
    Case("fp8_quant", "per-token-multi-tile", _quant((3, 4400), "per_token_dynamic")),
    # every mode on 2-D and 3-D inputs (the scales take the leading dims), a zero row
    Case("fp8_quant", "per-token-3d-zero-row", _quant((2, 3, 72), "per_token_dynamic",
                                                      zero_row=True)),
    Case("fp8_quant", "block-3d", _quant((2, 2, 160), "block")),
    Case("fp8_quant", "static-3d", _quant((2, 3, 40), "per_tensor_static", static=0.01)),
    Case("fp8_quant", "per-tensor-dynamic-2d", _quant((5, 48), "per_tensor_dynamic")),
    Case("fp8_scaled_gemm", "a-tensor-w-channel-large-k-fp32",
         _scaled_gemm(5, 2048, 24, False, True, torch.float32, per_channel=True)),
    Case("fp8_scaled_gemm", "a-token-w-tensor",
         _scaled_gemm(6, 64, 40, True, False, torch.bfloat16, per_channel=False)),
    Case("int8_scaled_gemm", "w-tensor-large-k",
         _int8_gemm((5,), 2048, 24, False, True, per_channel=False)),
    Case("int8_scaled_gemm", "a-token-w-tensor",
         _int8_gemm((6,), 48, 20, True, False, per_channel=False)),
    Case("attention_prefill", "scale-other", _prefill(1, 9, 2, 1, 32, False, scale=0.3)),
    Case("attention_decode", "mha-scale-other", _decode((7, 20), 1, 2, 2, 32, 8, scale=0.2)),
    Case("fused_moe", "top1", _moe(9, 32, 40, 4, 1, True)),
)


# One engine-shaped call per op (aligned sizes, contiguous): what the selection table is
# judged on. The parity cases above are odd on purpose, and a GPU library may rightly send
# those to a fallback (e.g. torch._int_mm needs M > 16 and K, N multiples of 8 on a GPU).
SELECTION_CASES: dict[str, Case] = {case.op: case for case in (
    Case("linear", "typical", _linear((32,), 256, 512, True)),
    Case("rms_norm", "typical", _norm((32, 256))),
    Case("add_rms_norm", "typical", _norm((32, 256), residual=True)),
    Case("silu_and_mul", "typical", _gated((32, 512))),
    Case("gelu_and_mul", "typical", _gated((32, 512), "tanh")),
    Case("rotary_embedding", "typical", _rope((32,), 8, 2, 64, 64, True)),
    Case("fp8_quant", "typical", _quant((32, 256), "per_token_dynamic")),
    Case("fp8_block_gemm", "typical", _block_gemm((32,), 256, 256, torch.bfloat16)),
    Case("fp8_scaled_gemm", "typical", _scaled_gemm(32, 256, 256, True, False,
                                                    torch.bfloat16)),
    Case("int8_scaled_gemm", "typical", _int8_gemm((32,), 256, 256, True, True)),
    Case("attention_prefill", "typical", _prefill(2, 16, 8, 2, 64, True)),
    Case("attention_decode", "typical", _decode((40, 70), 1, 8, 2, 64, 16)),
    Case("fused_moe", "typical", _moe(32, 128, 64, 8, 2, True)),
)}


def cases_for(op: str) -> tuple[Case, ...]:
    return tuple(case for case in CASES if case.op == op)
