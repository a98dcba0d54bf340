"""RMSNorm and fused residual add + RMSNorm, one program per row, fp32 accumulation."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from refengine.triton_kernels._numerics import round_to_bf16, store_rounded
from refengine.triton_kernels._rows import as_rows, tiles


@triton.jit
def rms_norm_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    n_cols,
    stride_xr,
    stride_xc,
    stride_or,
    eps,
    BLOCK: tl.constexpr,
    N_TILES: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xr
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for tile in range(N_TILES):
        cols = tile * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols * stride_xc, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.math.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for tile in range(N_TILES):
        cols = tile * BLOCK + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols * stride_xc, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = x * rstd * w
        store_rounded(out_ptr, row * stride_or + cols, y, mask)


@triton.jit
def add_rms_norm_kernel(
    x_ptr,
    res_ptr,
    w_ptr,
    out_ptr,
    n_cols,
    stride_xr,
    stride_xc,
    stride_rr,
    stride_rc,
    stride_or,
    eps,
    BLOCK: tl.constexpr,
    N_TILES: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xr
    r_row = res_ptr + row * stride_rr
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for tile in range(N_TILES):
        cols = tile * BLOCK + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols * stride_xc, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_row + cols * stride_rc, mask=mask, other=0.0).to(tl.float32)
        # The sum is rounded to the residual's dtype once and the norm is taken of that
        # stored value, so `out` is exactly the norm of the residual the caller sees.
        s = x + r
        if res_ptr.dtype.element_ty == tl.bfloat16:
            s = round_to_bf16(s)
        s = s.to(res_ptr.dtype.element_ty)
        tl.store(r_row + cols * stride_rc, s, mask=mask)
        sf = s.to(tl.float32)
        acc += sf * sf
    rstd = tl.math.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for tile in range(N_TILES):
        cols = tile * BLOCK + tl.arange(0, BLOCK)
        mask = cols < n_cols
        s = tl.load(r_row + cols * stride_rc, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = s * rstd * w
        store_rounded(out_ptr, row * stride_or + cols, y, mask)


def _check(x: torch.Tensor, weight: torch.Tensor) -> None:
    if weight.dim() != 1 or weight.shape[0] != x.shape[-1]:
        raise ValueError(f"weight shape {tuple(weight.shape)} does not match x {tuple(x.shape)}")
    if weight.device != x.device:
        raise ValueError(f"weight on {weight.device}, x on {x.device}")


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    _check(x, weight)
    rows = as_rows(x)
    w = weight.contiguous()
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    n_rows, n_cols = rows.shape
    if n_rows and n_cols:
        rms_norm_kernel[(n_rows,)](
            rows,
            w,
            out,
            n_cols,
            rows.stride(0),
            rows.stride(1),
            out.stride(0),
            float(eps),
            **tiles(n_cols),
        )
    return out.view(x.shape)


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    """Returns rms_norm(x + residual); ``residual`` is overwritten with x + residual."""
    _check(x, weight)
    if residual.shape != x.shape or residual.dtype != x.dtype:
        raise ValueError(
            f"residual {tuple(residual.shape)} {residual.dtype} must match x "
            f"{tuple(x.shape)} {x.dtype}"
        )
    rows = as_rows(x)
    # A residual whose leading dims cannot be merged is updated through a contiguous
    # copy: slower, but the caller still sees the contract's in-place update.
    direct = residual_in_place_ok(residual)
    res_rows = as_rows(residual) if direct else residual.reshape(-1, residual.shape[-1])
    w = weight.contiguous()
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    n_rows, n_cols = rows.shape
    if n_rows and n_cols:
        add_rms_norm_kernel[(n_rows,)](
            rows,
            res_rows,
            w,
            out,
            n_cols,
            rows.stride(0),
            rows.stride(1),
            res_rows.stride(0),
            res_rows.stride(1),
            out.stride(0),
            float(eps),
            **tiles(n_cols),
        )
    if not direct:
        residual.copy_(res_rows.view(residual.shape))
    return out.view(x.shape)


def residual_in_place_ok(residual: torch.Tensor) -> bool:
    """Whether the residual can be updated in place through a rows view."""
    if residual.dim() <= 2:
        return True
    try:
        residual.view(-1, residual.shape[-1])
    except RuntimeError:
        return False
    return True
