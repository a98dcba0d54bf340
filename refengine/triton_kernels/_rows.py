"""Viewing an op's input as rows of its last dimension, keeping its strides."""

from __future__ import annotations

import torch


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """A 2-D [rows, last] view of ``x`` that keeps both strides when that is possible.

    Strided rows and columns are handed to the kernels as strides, so slices and
    transposes need no copy. Only leading dimensions that cannot be merged (a permuted
    3-D tensor, say) are copied, which keeps the result correct.
    """
    if x.dim() == 0:
        raise ValueError("expected a tensor with at least one dimension")
    if x.dim() == 1:
        return x.unsqueeze(0)
    try:
        return x.view(-1, x.shape[-1])
    except RuntimeError:
        return x.reshape(-1, x.shape[-1])


def tiles(n: int, cap: int = 4096) -> dict[str, int]:
    """BLOCK (a power of two, at most ``cap``) and N_TILES covering ``n`` columns.

    The trip count is a compile-time constant on purpose: with numpy >= 2.4, Triton
    3.6.0's interpreter cannot use a runtime integer as a loop bound (its scalars are
    1-element arrays and ``int()`` of those now raises), so ``range(0, n, BLOCK)`` over a
    kernel argument fails on the CPU path.
    """
    block = 1
    while block < n and block < cap:
        block *= 2
    return {"BLOCK": block, "N_TILES": max(1, -(-n // block))}
