"""Small model blocks for the fusion suite and tests, with weights from a fixed seed.

Each block is an nn.Module over 2-D token tensors [T, H] using refengine ops only, so
the compiled graph holds the patterns real decoder layers produce. The decoder layer is
the e2e decoder's own (model/decoder.py), with as many kv heads as heads and causal
attention over its own tokens.
"""

from __future__ import annotations

import torch
from torch import nn

import refengine.ops as R
from refengine.model.decoder import DecoderLayer, LayerConfig
from refengine.model.weights import SeededWeights, frozen
from refengine.ops.collective import world_group_name

EPS = 1e-6
HIDDEN, HEADS, HEAD_DIM, INTER, TOKENS = 64, 4, 16, 128, 8
LAYER = LayerConfig(hidden=HIDDEN, heads=HEADS, kv_heads=HEADS, head_dim=HEAD_DIM,
                    inter=INTER, eps=EPS)


def decoder_layer(dtype: torch.dtype, fp8_dtype: torch.dtype | None = None,
                  seed: int = 0) -> DecoderLayer:
    """A decoder layer of LAYER's shape; ``fp8_dtype``: fp8 activations into fp8 GEMMs."""
    return DecoderLayer(LAYER, SeededWeights(seed, dtype), fp8_dtype)


class MoEBlock(nn.Module):
    """Residual add + norm, router, top-2 of 4 experts."""

    def __init__(self, dtype: torch.dtype, seed: int = 0, experts: int = 4) -> None:
        super().__init__()
        draw = SeededWeights(seed, dtype)
        self.ln = frozen(draw.norm(HIDDEN))
        self.router = frozen(draw.weight(experts, HIDDEN))
        self.w13 = frozen(draw.weight(experts, 2 * INTER, HIDDEN))
        self.w2 = frozen(draw.weight(experts, HIDDEN, INTER))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        residual = x + residual
        h = R.rms_norm(residual, self.ln, EPS)
        logits = R.linear(h, self.router, None)
        return R.fused_moe(h, logits, self.w13, self.w2, 2, True), residual


def _mlp_weights(dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, ...]:
    """The gated MLP's weights: w13 [2, INTER, HIDDEN] (gate rows, up rows), w2, the norm's."""
    draw = SeededWeights(seed, dtype)
    w13 = draw.weight(2, INTER, HIDDEN)
    w2 = draw.weight(HIDDEN, INTER)
    return w13, w2, draw.norm(HIDDEN)


class MLPBlock(nn.Module):
    """The unsharded MLP: gate/up projection, SiLU-and-mul, down projection, norm; the
    weights TPMLPBlock shards (same seed), for comparing the shards' result with."""

    def __init__(self, dtype: torch.dtype, seed: int = 0) -> None:
        super().__init__()
        w13, w2, ln = _mlp_weights(dtype, seed)
        self.w13 = frozen(w13.reshape(2 * INTER, HIDDEN))
        self.w2, self.ln = frozen(w2), frozen(ln)

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
        self.w13, self.w2, self.ln = frozen(w13_shard), frozen(w2_shard), frozen(ln)
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
