"""SiLU-and-mul: out = silu(x[..., :d]) * x[..., d:], computed in fp32."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from refengine.triton_kernels._numerics import store_rounded
from refengine.triton_kernels._rows import as_rows, tiles


@triton.jit
def silu_and_mul_kernel(
    x_ptr,
    out_ptr,
    d,
    stride_xr,
    stride_xc,
    stride_or,
    BLOCK: tl.constexpr,
    N_TILES: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xr
    for tile in range(N_TILES):
        cols = tile * BLOCK + tl.arange(0, BLOCK)
        mask = cols < d
        a = tl.load(x_row + cols * stride_xc, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(x_row + (cols + d) * stride_xc, mask=mask, other=0.0).to(tl.float32)
        y = a * tl.sigmoid(a) * b
        store_rounded(out_ptr, row * stride_or + cols, y, mask)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    if x.dim() == 0 or x.shape[-1] % 2:
        raise ValueError(f"last dimension must be even, got shape {tuple(x.shape)}")
    d = x.shape[-1] // 2
    rows = as_rows(x)
    out = torch.empty((rows.shape[0], d), dtype=x.dtype, device=x.device)
    if rows.shape[0] and d:
        silu_and_mul_kernel[(rows.shape[0],)](
            rows, out, d, rows.stride(0), rows.stride(1), out.stride(0), **tiles(d)
        )
    return out.view(*x.shape[:-1], d)
