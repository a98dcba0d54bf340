"""Dynamic fp8 quantisation: per tensor, per token (row) and per 1 x GROUP block.

scale = max(amax, MIN_SCALE * fp8_max) / fp8_max; q = fp8(clamp(x / scale, +-fp8_max)),
rounded to the fp8 grid in fp32 before the cast (see _numerics for why).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from refengine.ops.spec import MIN_SCALE
from refengine.triton_kernels._numerics import round_to_fp8_grid
from refengine.triton_kernels._rows import as_rows, tiles


@triton.jit
def row_amax_kernel(
    x_ptr, amax_ptr, n_cols, stride_xr, stride_xc, BLOCK: tl.constexpr, N_TILES: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for tile in range(N_TILES):
        cols = tile * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_xr + cols * stride_xc, mask=cols < n_cols, other=0.0)
        acc = tl.maximum(acc, tl.abs(x.to(tl.float32)))
    tl.store(amax_ptr + row, tl.max(acc, axis=0))


@triton.jit
def quant_groups_kernel(
    x_ptr,
    q_ptr,
    scale_ptr,
    n_cols,
    stride_xr,
    stride_xc,
    stride_qr,
    n_groups,
    fp8_max,
    amax_floor,
    GROUP: tl.constexpr,
    BLOCK: tl.constexpr,
    N_TILES: tl.constexpr,
    MANT_BITS: tl.constexpr,
    MIN_EXP: tl.constexpr,
    DYNAMIC: tl.constexpr,
):
    """One program per (row, group) of GROUP columns; DYNAMIC=False reads a given scale."""
    row = tl.program_id(0).to(tl.int64)
    group = tl.program_id(1)
    base = group * GROUP
    x_row = x_ptr + row * stride_xr
    if DYNAMIC:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for tile in range(N_TILES):
            cols = base + tile * BLOCK + tl.arange(0, BLOCK)
            mask = (cols < n_cols) & (cols < base + GROUP)
            x = tl.load(x_row + cols * stride_xc, mask=mask, other=0.0).to(tl.float32)
            acc = tl.maximum(acc, tl.abs(x))
        scale = tl.math.div_rn(tl.maximum(tl.max(acc, axis=0), amax_floor), fp8_max)
        tl.store(scale_ptr + row * n_groups + group, scale)
    else:
        scale = tl.load(scale_ptr)
    for tile in range(N_TILES):
        cols = base + tile * BLOCK + tl.arange(0, BLOCK)
        mask = (cols < n_cols) & (cols < base + GROUP)
        x = tl.load(x_row + cols * stride_xc, mask=mask, other=0.0).to(tl.float32)
        y = tl.minimum(tl.maximum(tl.math.div_rn(x, scale), -fp8_max), fp8_max)
        y = round_to_fp8_grid(y, MANT_BITS, MIN_EXP)
        tl.store(q_ptr + row * stride_qr + cols, y.to(q_ptr.dtype.element_ty), mask=mask)


def fp8_format(dtype: torch.dtype) -> tuple[float, int, int]:
    """(max, mantissa bits, exponent of the smallest normal) of an fp8 dtype."""
    fi = torch.finfo(dtype)
    return float(fi.max), round(-math.log2(fi.eps)), round(math.log2(fi.tiny))


def fp8_quant(
    x: torch.Tensor,
    fp8_dtype: torch.dtype,
    mode: str,
    scale: torch.Tensor | None,
    group_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """refengine's fp8_quant contract (refengine/ops/spec.py)."""
    fmax, mant_bits, min_exp = fp8_format(fp8_dtype)
    floor = MIN_SCALE * fmax  # amax is floored before the division, as in the reference
    rows = as_rows(x)
    n_rows, n_cols = rows.shape
    lead = x.shape[:-1] if x.dim() > 1 else ()
    q = torch.empty((n_rows, n_cols), dtype=fp8_dtype, device=x.device)
    launch = _Launch(rows, q, fmax, floor, mant_bits, min_exp)
    if mode == "per_tensor_static":
        if scale is None:
            raise ValueError("fp8_quant: per_tensor_static needs a scale")
        scales = scale.to(device=x.device, dtype=torch.float32).reshape(1).clone()
        launch(scales, groups=1, group=n_cols, dynamic=False)
        return q.view(x.shape), scales
    if mode == "per_tensor_dynamic":
        amax = torch.zeros(max(n_rows, 1), dtype=torch.float32, device=x.device)
        if n_rows and n_cols:
            row_amax_kernel[(n_rows,)](
                rows, amax, n_cols, rows.stride(0), rows.stride(1), **tiles(n_cols)
            )
        scales = (amax.max().clamp(min=floor) / fmax).reshape(1)
        launch(scales, groups=1, group=n_cols, dynamic=False)
        return q.view(x.shape), scales
    if mode == "per_token_dynamic":
        scales = torch.empty((n_rows, 1), dtype=torch.float32, device=x.device)
        launch(scales, groups=1, group=n_cols, dynamic=True)
        return q.view(x.shape), scales.view(*lead, 1)
    if mode == "block":
        groups = -(-n_cols // group_size)
        scales = torch.empty((n_rows, groups), dtype=torch.float32, device=x.device)
        launch(scales, groups=groups, group=group_size, dynamic=True)
        return q.view(x.shape), scales.view(*lead, groups)
    raise ValueError(f"fp8_quant: unknown mode {mode!r}")


class _Launch:
    def __init__(
        self,
        rows: torch.Tensor,
        q: torch.Tensor,
        fmax: float,
        floor: float,
        mant_bits: int,
        min_exp: int,
    ) -> None:
        self.rows, self.q, self.fmax, self.floor = rows, q, fmax, floor
        self.consts = {"MANT_BITS": mant_bits, "MIN_EXP": min_exp}

    def __call__(self, scales: torch.Tensor, *, groups: int, group: int, dynamic: bool) -> None:
        rows = self.rows
        if rows.shape[0] == 0 or rows.shape[1] == 0:
            return
        quant_groups_kernel[(rows.shape[0], groups)](
            rows,
            self.q,
            scales,
            rows.shape[1],
            rows.stride(0),
            rows.stride(1),
            self.q.stride(0),
            groups,
            self.fmax,
            self.floor,
            GROUP=group,
            DYNAMIC=dynamic,
            **tiles(group),
            **self.consts,
        )
