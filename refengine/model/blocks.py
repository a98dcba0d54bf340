"""Small model blocks for the fusion suite and tests, with weights from a fixed seed.

Each block is an nn.Module over 2-D token tensors [T, H] using refengine ops only, so
the compiled graph holds the patterns real decoder layers produce.
"""

from __future__ import annotations

import torch
from torch import nn

import refengine.ops as R
from refengine.ops.collective import world_group_name

EPS = 1e-6
HIDDEN, HEADS, HEAD_DIM, INTER, TOKENS = 64, 4, 16, 128, 8


def _w(gen: torch.Generator, *shape: int, dtype: torch.dtype) -> nn.Parameter:
    t = torch.randn(*shape, generator=gen) / shape[-1] ** 0.5
    return nn.Parameter(t.to(dtype), requires_grad=False)


def _norm_w(gen: torch.Generator, n: int, dtype: torch.dtype) -> nn.Parameter:
    t = 1.0 + 0.1 * torch.randn(n, generator=gen)
    return nn.Parameter(t.to(dtype), requires_grad=False)


class DecoderLayer(nn.Module):
    """Pre-norm attention + gated MLP; with ``fp8_dtype``, fp8 activations into fp8 GEMMs."""

    def __init__(
        self, dtype: torch.dtype, fp8_dtype: torch.dtype | None = None, seed: int = 0
    ) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.dtype, self.fp8 = dtype, fp8_dtype
        self.ln1, self.ln2 = _norm_w(gen, HIDDEN, dtype), _norm_w(gen, HIDDEN, dtype)
        self.wqkv = _w(gen, 3 * HEADS * HEAD_DIM, HIDDEN, dtype=dtype)
        self.wo = _w(gen, HIDDEN, HEADS * HEAD_DIM, dtype=dtype)
        self.w13 = _w(gen, 2 * INTER, HIDDEN, dtype=dtype)
        self.w2 = _w(gen, HIDDEN, INTER, dtype=dtype)
        if fp8_dtype is not None:
            for name in ("wqkv", "w13", "w2"):
                q, s = R.fp8_quant(getattr(self, name).data, fp8_dtype, "per_tensor_dynamic")
                self.register_buffer(f"{name}_q", q)
                self.register_buffer(f"{name}_s", s)

    def _proj(self, h: torch.Tensor, name: str) -> torch.Tensor:
        if self.fp8 is None:
            return R.linear(h, getattr(self, name), None)
        q, s = R.fp8_quant(h, self.fp8, "per_token_dynamic")
        return self._gemm(q, s, name)

    def _gemm(self, q: torch.Tensor, s: torch.Tensor, name: str) -> torch.Tensor:
        return R.fp8_scaled_gemm(
            q, s, getattr(self, f"{name}_q"), getattr(self, f"{name}_s"), None, self.dtype
        )

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        residual = x + residual
        h = R.rms_norm(residual, self.ln1, EPS)
        qkv = self._proj(h, "wqkv").view(1, -1, 3 * HEADS, HEAD_DIM)
        q, k, v = torch.split(qkv, HEADS, dim=2)
        attn = R.attention_prefill(q, k, v, HEAD_DIM**-0.5, True).reshape(-1, HEADS * HEAD_DIM)
        residual = R.linear(attn, self.wo, None) + residual
        h = R.rms_norm(residual, self.ln2, EPS)
        gate_up = self._proj(h, "w13")
        if self.fp8 is None:
            out = R.linear(R.silu_and_mul(gate_up), self.w2, None)
        else:
            q8, s8 = R.fp8_quant(R.silu_and_mul(gate_up), self.fp8, "per_token_dynamic")
            out = self._gemm(q8, s8, "w2")
        return out, residual


class MoEBlock(nn.Module):
    """Residual add + norm, router, top-2 of 4 experts."""

    def __init__(self, dtype: torch.dtype, seed: int = 0, experts: int = 4) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.ln = _norm_w(gen, HIDDEN, dtype)
        self.router = _w(gen, experts, HIDDEN, dtype=dtype)
        self.w13 = _w(gen, experts, 2 * INTER, HIDDEN, dtype=dtype)
        self.w2 = _w(gen, experts, HIDDEN, INTER, dtype=dtype)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        residual = x + residual
        h = R.rms_norm(residual, self.ln, EPS)
        logits = R.linear(h, self.router, None)
        return R.fused_moe(h, logits, self.w13, self.w2, 2, True), residual


def _mlp_weights(dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, ...]:
    """The gated MLP's weights: w13 [2, INTER, HIDDEN] (gate rows, up rows), w2, the norm's."""
    gen = torch.Generator().manual_seed(seed)
    w13 = _w(gen, 2, INTER, HIDDEN, dtype=dtype)
    w2 = _w(gen, HIDDEN, INTER, dtype=dtype)
    return w13.data, w2.data, _norm_w(gen, HIDDEN, dtype).data


def _frozen(t: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(t.contiguous(), requires_grad=False)


class MLPBlock(nn.Module):
    """The unsharded MLP: gate/up projection, SiLU-and-mul, down projection, norm; the
    weights TPMLPBlock shards (same seed), for comparing the shards' result with."""

    def __init__(self, dtype: torch.dtype, seed: int = 0) -> None:
        super().__init__()
        w13, w2, ln = _mlp_weights(dtype, seed)
        self.w13 = _frozen(w13.reshape(2 * INTER, HIDDEN))
        self.w2, self.ln = _frozen(w2), _frozen(ln)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = R.linear(R.silu_and_mul(R.linear(x, self.w13, None)), self.w2, None)
        return R.rms_norm(out, self.ln, EPS)


class TPMLPBlock(nn.Module):
    """One rank's shard of a tensor-parallel MLP: column then row parallel, all_reduce, norm.

    Each rank's output is the whole block's (the all-reduce sums the row-parallel parts):
    ``unsharded`` is that block, on the same weights."""

    unsharded = MLPBlock

    def __init__(self, dtype: torch.dtype, rank: int, world: int, seed: int = 0) -> None:
        super().__init__()
        w13, w2, ln = _mlp_weights(dtype, seed)
        w13_shard, w2_shard = self.shard(w13, w2, rank, world)
        self.w13, self.w2, self.ln = _frozen(w13_shard), _frozen(w2_shard), _frozen(ln)
        self.group_name = world_group_name()

    @staticmethod
    def shard(w13: torch.Tensor, w2: torch.Tensor, rank: int,
              world: int) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's rows of the merged gate/up weight (its part of the gate rows, then
        the same part of the up rows) and the matching columns of the down weight."""
        part = INTER // world
        rows = slice(rank * part, (rank + 1) * part)
        return w13[:, rows].reshape(2 * part, HIDDEN), w2[:, rows]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial = R.linear(R.silu_and_mul(R.linear(x, self.w13, None)), self.w2, None)
        reduced = torch.ops.refengine.all_reduce(partial, self.group_name)
        return R.rms_norm(reduced, self.ln, EPS)


def inputs(dtype: torch.dtype, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(TOKENS, HIDDEN, generator=gen).to(dtype),
        torch.randn(TOKENS, HIDDEN, generator=gen).to(dtype),
    )
