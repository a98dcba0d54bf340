"""The shapes and layouts each op is checked on.

A case builds the op's full argument tuple from a seeded generator, so building it
twice gives bit-identical tensors with identical strides: the reference, the provider
call and the repeat call each get their own untouched copy. Shapes are odd on purpose
(not multiples of 8 or 128), include 3-D / 4-D inputs, and strided variants: a
transposed weight, an activation sliced out of a wider buffer; plus an engine-aligned
GEMM, where vendor libraries switch to their blocked / packed kernels.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from refengine.ops import reference
from refengine.ops.allpairs import all_pairs
from refengine.ops.domains import (
    ALLOWED,
    DOMAINS,
    LARGE_EPS,
    LARGE_K,
    TILE_CAP,
    VECTOR,
    classify,
)
from refengine.ops.spec import FP8_BLOCK, bind, fp8_max, n_groups

Builder = Callable[[torch.dtype, torch.dtype | None, str, torch.Generator], tuple[Any, ...]]
FP8_OPS = ("fp8_quant", "fp8_block_gemm", "fp8_scaled_gemm")


@dataclass(frozen=True)
class Case:
    op: str
    id: str
    build: Builder
    layout: str = "contiguous"  # what the id promises; checked against the built args
    dtypes: tuple[str, ...] | None = None  # the dtypes it runs on (None: every one)

    def args(self, dtype: torch.dtype, fp8: torch.dtype | None, device: str,
             seed: int) -> tuple[Any, ...]:
        gen = torch.Generator().manual_seed(seed)
        return self.build(dtype, fp8, device, gen)


def _randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32,
           device: str = "cpu", scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=gen) * scale).to(device=device, dtype=dtype)


# What fills the columns of a wide buffer outside the view a case hands over: a kernel
# that reads past its row (a mask off by one, a stride taken for the row length) reads
# this, far outside the data's range, instead of a neighbour's value that may hide it.
POISON = 4096.0


def _wide_then_slice(gen: torch.Generator, rows: tuple[int, ...], cols: int, dtype: torch.dtype,
                     device: str, scale: float = 1.0) -> torch.Tensor:
    """[*rows, cols] viewed out of a buffer with a wider last dim: non-contiguous rows,
    the columns around them POISON."""
    wide = _randn(gen, *rows, cols + 37, dtype=dtype, device=device, scale=scale)
    wide[..., :3] = POISON
    wide[..., cols + 3:] = POISON
    return wide[..., 3:cols + 3]


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


def _strided_residual(g: torch.Generator, shape: tuple[int, ...], dt: torch.dtype,
                      dev: str) -> torch.Tensor:
    """A non-contiguous residual: 2-D rows sliced out of a wider buffer; 3-D+ with its two
    leading dims transposed (no rows view merges them: the kernel must write it back)."""
    if len(shape) == 2:
        return _wide_then_slice(g, shape[:-1], shape[-1], dt, dev)
    swapped = (shape[1], shape[0], *shape[2:])
    return _randn(g, *swapped, dtype=dt, device=dev).transpose(0, 1)


def _norm(shape: tuple[int, ...], strided: bool = False, residual: bool = False,
          eps: float | None = None, residual_strided: bool = False) -> Builder:
    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        h = shape[-1]
        x = (_wide_then_slice(g, shape[:-1], h, dt, dev) if strided
             else _randn(g, *shape, dtype=dt, device=dev))
        w = _randn(g, h, dtype=dt, device=dev, scale=0.5) + 1
        if residual:
            r = (_strided_residual(g, shape, dt, dev) if residual_strided
                 else _randn(g, *shape, dtype=dt, device=dev))
            return x, r, w, eps or 1e-6
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
        if split_heads and strided:  # each head's row sliced out of a wider buffer
            q = _wide_then_slice(g, (*lead, hq), d, dt, dev)
            k = _wide_then_slice(g, (*lead, hkv), d, dt, dev)
        elif split_heads:
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
           static: float | None = None, zero_row: bool = False,
           spike_first: bool = False) -> Builder:
    """``spike_first``: the first element is the largest (a first token's massive
    activation), so an amax that skips or shifts a row's first column shows."""
    def build(dt: torch.dtype, fp8: Any, dev: str, g: torch.Generator) -> tuple[Any, ...]:
        x = (_wide_then_slice(g, shape[:-1], shape[-1], torch.bfloat16, dev, scale) if strided
             else _randn(g, *shape, dtype=torch.bfloat16, device=dev, scale=scale))
        if spike_first:
            x[(0,) * x.dim()] = 3 * x.abs().max()
        if zero_row:  # a padding token: dynamic scales must floor, not divide by zero
            x.select(-2, 1).zero_()
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


# -- the hand-written cases kept: each encodes a finding something refers to by its id --
#
# A known_failures entry of a matrix names it (its id, or its measured numbers in the
# reason), a bug-injection test under tests/ runs it, or it is the one call the
# parametrisation cannot generate (the clamp of a saturating static scale). They run on
# every dtype of the platform; inductor and the smoke tier take each op's first case.
FINDINGS: tuple[Case, ...] = (
    # zen: zentorch_mm rewrites its weight on aligned shapes; vendor GEMMs' packed path
    Case("linear", "aligned-k256-n512", _linear((32,), 256, 512, False)),
    # tests/integration/test_parity_catches_bugs.py (wrong epsilon, undeclared mutation),
    # select tests; zen: zentorch_rms_norm on 4-D input and row-sliced input
    Case("rms_norm", "2d-odd", _norm((7, 130))),
    Case("rms_norm", "4d", _norm((2, 3, 5, 64))),
    Case("rms_norm", "x-strided", _norm((9, 96), strided=True), "strided"),
    # zen: zentorch_add_rms_norm_ on 3-D input
    Case("add_rms_norm", "3d", _norm((2, 5, 96), residual=True)),
    # test_parity_catches_bugs.py (gate and up swapped), select tests
    Case("silu_and_mul", "2d-odd", _gated((7, 74))),
    # test_parity_catches_bugs.py (the fp8 max of the wrong flavour)
    Case("fp8_quant", "per-token-dynamic", _quant((9, 100), "per_token_dynamic")),
    # values far past the fp8 range under a static scale: the clamp before the cast
    Case("fp8_quant", "static-saturates", _quant((4, 64), "per_tensor_static", scale=500.0,
                                                 static=1.0)),
    # cpu: inductor's compiled block scales read garbage in a partial last group; the
    # whole-group case is the one inductor also gets (kernel_parity conftest's
    # ONE_CASE_EXTRA), so the compiled block GEMM is checked somewhere
    Case("fp8_block_gemm", "k200-n130-bf16", _block_gemm((5,), 200, 130, torch.bfloat16)),
    Case("fp8_block_gemm", "3d-k256-fp32", _block_gemm((2, 3), 256, 96, torch.float32)),
    # test_parity_catches_bugs.py (a missing weight scale)
    Case("int8_scaled_gemm", "per-token-bias", _int8_gemm((7,), 67, 45, True, True)),
    # cpu: bf16 SDPA's rounding, measured on these three (xfail and quarantine)
    Case("attention_prefill", "causal-gqa", _prefill(2, 9, 4, 2, 32, True)),
    Case("attention_prefill", "noncausal-mha", _prefill(1, 17, 2, 2, 64, False)),
    Case("attention_prefill", "qkv-strided", _prefill(2, 7, 4, 1, 32, True, strided=True),
         "strided"),
    # cpu: per-sequence bf16 SDPA, measured on these two (quarantine)
    Case("attention_decode", "single-token", _decode((5, 33, 17), 1, 4, 2, 32, 16)),
    Case("attention_decode", "multi-token", _decode((9, 40), 3, 2, 1, 64, 8)),
    # cpu: torch._grouped_mm's bf16 rounding, zen: zentorch_fused_moe writes its weights
    Case("fused_moe", "top2-renorm", _moe(7, 64, 48, 4, 2, True)),
    Case("fused_moe", "top3-8experts", _moe(13, 32, 40, 8, 3, False)),
    Case("fused_moe", "top1", _moe(9, 32, 40, 4, 1, True)),
)


# -- cases generated from the declared argument domains ------------------------------------
#
# For each op, refengine.ops.allpairs picks rows of argument values (refengine/ops/domains.py,
# plus the dtypes the platform runs the op on) so that every value of every argument, and
# every pair of values of two arguments, is in some case, counting the kept cases above
# (which run on every dtype) as covered. Each row is built below at odd sizes, and runs
# on the one dtype its row names. Row i varies the sizes a little, so no two cases share
# a shape by accident.

Realize = Callable[[dict[str, str], int], tuple[Builder, str]]


def _lead(v: dict[str, str], i: int, rows: int = 5) -> tuple[int, ...]:
    # few rows: the Triton interpreter runs one program per row (or group) in turn
    if v["rank"] == "1d":
        return ()
    return (rows + i % 3,) if v["rank"] == "2d" else (2, 2 + i % 2)


def _strided(v: dict[str, str]) -> bool:
    return v["layout"] == "strided"


def _gen_linear(v: dict[str, str], i: int) -> tuple[Builder, str]:
    k = LARGE_K + 5 if v["k"] == "large-k" else 41 + 6 * i
    # strided: a weight transposed in place, or an activation sliced out of a wider buffer
    w_t, x_strided = _strided(v) and i % 2 == 0, _strided(v) and i % 2 == 1
    return _linear(_lead(v, i), k, 24 + 5 * i, v["bias"] == "given", w_t=w_t,
                   x_strided=x_strided), v["layout"]


def _fit(width: int, v: dict[str, str]) -> int:
    """``width`` (odd), or the next multiple of 2 x VECTOR where the row asks ``aligned``."""
    step = 2 * VECTOR
    return -(-width // step) * step if v["vector"] == "aligned" else width


def _gen_norm(residual: bool) -> Realize:
    def realize(v: dict[str, str], i: int) -> tuple[Builder, str]:
        h = _fit(TILE_CAP + 203 + 2 * i if v["width"] == "multi-tile" else 90 + 6 * i + 1, v)
        layout = "strided" if "strided" in (v["layout"], v.get("residual")) else "contiguous"
        return _norm((*_lead(v, i, 3), h), strided=_strided(v), residual=residual,
                     eps=LARGE_EPS if v["eps"] == "large" else None,
                     residual_strided=v.get("residual") == "strided"), layout
    return realize


def _gen_silu(v: dict[str, str], i: int) -> tuple[Builder, str]:
    d = _fit(TILE_CAP + 105 + 2 * i if v["width"] == "multi-tile" else 37 + 4 * i, v)
    return _gated((*_lead(v, i, 3), 2 * d), strided=_strided(v)), v["layout"]


def _gen_gelu(v: dict[str, str], i: int) -> tuple[Builder, str]:
    return _gated((*_lead(v, i), 2 * _fit(37 + 4 * i, v)), v["approximate"],
                  strided=_strided(v)), v["layout"]


def _gen_rope(v: dict[str, str], i: int) -> tuple[Builder, str]:
    d = 32 if i % 2 else 64
    hkv = 1 if v["kv_heads"] == "grouped" else 3
    lead = (7 + 2 * i,) if i % 2 else (2, 3 + i)
    return _rope(lead, 3, hkv, d, d if v["rotary_dim"] == "full" else d // 2,
                 v["is_neox"] == "true", split_heads=v["heads"] == "split",
                 strided=_strided(v)), v["layout"]


def _gen_quant(v: dict[str, str], i: int) -> tuple[Builder, str]:
    mode = v["mode"]
    if mode == "block":
        k = 2 * FP8_BLOCK + 72 + 8 * i if v["last_group"] == "partial" else 2 * FP8_BLOCK
    else:
        k = TILE_CAP + 307 + 2 * i if v["width"] == "multi-tile" else 67 + 6 * i
    static = 0.02 if mode == "per_tensor_static" else None
    zero_row = v["zero_row"] == "present"
    lead = _lead(v, i, 3)
    if v["rank"] == "2d" and not zero_row and not _strided(v) and i % 3 == 0:
        lead = (1,)  # one token (a decode step of batch 1)
    # odd rows: activations below 1 in magnitude (|x| < ~0.9), where a masked-off lane
    # that counts as 1 in an amax changes the scale
    return _quant((*lead, k), mode, strided=_strided(v), static=static,
                  scale=0.2 if i % 2 else 1.0, zero_row=zero_row,
                  spike_first=mode == "per_tensor_dynamic" and i % 2 == 0), v["layout"]


def _gen_block_gemm(v: dict[str, str], i: int) -> tuple[Builder, str]:
    k = 2 * FP8_BLOCK + 72 if v["last_group"] == "partial" else 2 * FP8_BLOCK
    m = (3 + i % 3,) if v["rank"] == "2d" else (2, 3)
    return _block_gemm(m, k, 96 + 34 * (i % 2), getattr(torch, v["out_dtype"])), "contiguous"


def _gen_scaled_gemm(v: dict[str, str], i: int) -> tuple[Builder, str]:
    k = LARGE_K if v["k"] == "large-k" else 48 + 16 * i
    # odd rows a narrow output (N = 2, 6, ...), even rows two tokens (M = 2): a per-channel
    # or per-token scale with as few entries as the boundary between "one scale" and "a
    # scale per row / channel"
    m, n = (5 + 2 * i, 2 * i) if i % 2 else (2, 24 + 8 * i)
    return _scaled_gemm(m, k, n, v["a_scales"] == "per-token",
                        v["bias"] == "given", getattr(torch, v["out_dtype"]),
                        per_channel=v["w_scales"] == "per-channel"), "contiguous"


def _gen_int8(v: dict[str, str], i: int) -> tuple[Builder, str]:
    k = LARGE_K if v["k"] == "large-k" else 33 + 6 * i
    return _int8_gemm(_lead(v, i), k, 20 + 5 * i, v["a_scales"] == "per-token",
                      v["bias"] == "given", w_t=_strided(v),
                      per_channel=v["w_scales"] == "per-channel"), v["layout"]


def _gen_prefill(v: dict[str, str], i: int) -> tuple[Builder, str]:
    hkv = 1 if v["kv_heads"] == "grouped" else 2
    return _prefill(1 + i % 2, 9 + 2 * i, 2, hkv, 32, v["causal"] == "true",
                    strided=_strided(v),
                    scale=0.3 if v["scale"] == "other" else None), v["layout"]


def _gen_decode(v: dict[str, str], i: int) -> tuple[Builder, str]:
    n_new = 1 if v["queries"] == "one" else 2
    hkv = 1 if v["kv_heads"] == "grouped" else 2
    return _decode((7 + i, 20 + 3 * i), n_new, 2, hkv, 32, 8,
                   scale=0.2 if v["scale"] == "other" else None), "contiguous"


def _gen_moe(v: dict[str, str], i: int) -> tuple[Builder, str]:
    return _moe(9 + 2 * i, 32, 40, 4, 1 if v["top_k"] == "1" else 2,
                v["renormalize"] == "true"), "contiguous"


REALIZE: dict[str, Realize] = {
    "linear": _gen_linear, "rms_norm": _gen_norm(False), "add_rms_norm": _gen_norm(True),
    "silu_and_mul": _gen_silu, "gelu_and_mul": _gen_gelu, "rotary_embedding": _gen_rope,
    "fp8_quant": _gen_quant, "fp8_block_gemm": _gen_block_gemm,
    "fp8_scaled_gemm": _gen_scaled_gemm, "int8_scaled_gemm": _gen_int8,
    "attention_prefill": _gen_prefill, "attention_decode": _gen_decode, "fused_moe": _gen_moe,
}

# How a value reads in a case id (the value itself when it says what it is).
_TOKENS = {
    ("bias", "none"): "nobias", ("bias", "given"): "bias", ("eps", "small"): "eps-small",
    ("eps", "large"): "eps-large", ("k", "small"): "k-small", ("rank", "3d+"): "3d",
    ("approximate", "none"): "exact", ("is_neox", "true"): "neox",
    ("is_neox", "false"): "gptj", ("rotary_dim", "full"): "rot-full",
    ("rotary_dim", "partial"): "rot-partial", ("kv_heads", "equal"): "mha",
    ("kv_heads", "grouped"): "gqa", ("last_group", "full"): "groups-full",
    ("last_group", "partial"): "group-partial", ("zero_row", "absent"): "",
    ("zero_row", "present"): "zero-row", ("out_dtype", "bfloat16"): "out-bf16",
    ("out_dtype", "float32"): "out-fp32", ("a_scales", "per-tensor"): "a-tensor",
    ("a_scales", "per-token"): "a-token", ("w_scales", "per-tensor"): "w-tensor",
    ("w_scales", "per-channel"): "w-channel", ("scale", "default"): "scale-default",
    ("scale", "other"): "scale-other", ("causal", "true"): "causal",
    ("causal", "false"): "noncausal", ("queries", "one"): "one-query",
    ("queries", "several"): "queries", ("renormalize", "true"): "renorm",
    ("renormalize", "false"): "no-renorm", ("top_k", "1"): "top1",
    ("top_k", "several"): "topk", ("residual", "contiguous"): "",
    ("residual", "strided"): "residual-strided",
}


def case_id(values: dict[str, str]) -> str:
    """The row's values in the domain's order, e.g. ``eps-large-strided-3d-multi-tile``."""
    tokens = (_TOKENS.get((name, value), value) for name, value in values.items())
    return "-".join(t.replace("_", "-") for t in tokens if t)


def values_of(case: Case, dtype: torch.dtype | None = None,
              fp8: torch.dtype | None = None) -> dict[str, str]:
    """The declared argument values one case's call has."""
    act = torch.bfloat16 if case.op in FP8_OPS else (dtype or torch.float32)
    fp8 = fp8 or (torch.float8_e4m3fn if case.op in FP8_OPS else None)
    args = case.args(act, fp8, "cpu", 0)
    return classify(case.op, bind(case.op, args))


@functools.cache
def generated_cases(op: str, dtypes: tuple[str, ...] = ()) -> tuple[Case, ...]:
    """The op's cases from its domains (and ``dtypes``, the platform's, when given)."""
    domains: dict[str, tuple[str, ...]] = dict(DOMAINS[op])
    if dtypes:
        domains["dtype"] = dtypes
    kept = [values_of(case) for case in FINDINGS if case.op == op]
    covered = [{**values, "dtype": d} for values in kept for d in dtypes] if dtypes else kept
    rows = all_pairs(domains, ALLOWED.get(op), covered)
    merged: dict[str, tuple[Case, list[str]]] = {}  # rows that differ only in dtype
    for row in rows:
        values = {k: v for k, v in row.items() if k != "dtype"}
        key = case_id(values)
        if key not in merged:
            build, layout = REALIZE[op](values, len(merged))
            merged[key] = (Case(op, key, build, layout), [])
        if dtypes:
            merged[key][1].append(row["dtype"])
    return tuple(dataclasses.replace(case, dtypes=tuple(ds) if dtypes else None)
                 for case, ds in merged.values())


def cases_for(op: str, dtypes: tuple[str, ...] = ()) -> tuple[Case, ...]:
    """The kept cases of ``op`` (every dtype) then its generated ones (``dtypes``: the
    platform's dtype names for the op, which the generated cases are spread over)."""
    return (*(case for case in FINDINGS if case.op == op), *generated_cases(op, dtypes))


def dtypes_for(profile: Any, op: str) -> tuple[str | None, ...]:
    """The platform's dtype names an op's cases run on (its fp8 flavours for an fp8 op;
    None where it has none)."""
    if op in FP8_OPS:
        flavours = tuple(n for n in (profile.matrix.fp8.e4m3, profile.matrix.fp8.e5m2) if n)
        return flavours or (None,)
    return tuple(profile.dtypes)


def case_dtypes(case: Case, dtypes: tuple[str | None, ...]) -> tuple[str | None, ...]:
    """The platform dtypes one case runs on."""
    return dtypes if case.dtypes is None else tuple(d for d in dtypes if d in case.dtypes)


def case_where(op: str, **values: str) -> Case:
    """The first case of ``op`` whose call has these argument values."""
    for case in cases_for(op):
        have = values_of(case)
        if all(have.get(k) == v for k, v in values.items()):
            return case
    raise LookupError(f"{op}: no case with {values}")


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



def all_cases() -> tuple[Case, ...]:
    """Every op's cases (generated without a dtype axis: each runs on every dtype)."""
    from refengine.ops.spec import OP_NAMES

    return tuple(case for op in OP_NAMES for case in cases_for(op))
