"""The fused ops the passes produce, as ``refengine::`` custom ops.

Each fused op has a kernel per provider in FUSED_KERNELS. Only ``native`` exists so far:
it runs the component ops through the registry in the unfused order, rounding between
them exactly as the unfused graph does, so fused and unfused agree to the last bit
where the components are deterministic. A provider that lacks a fused kernel makes the
pass not applicable under that provider (see ``fused_provider``), instead of a pass
that silently matches nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.library import custom_op

import refengine.ops  # noqa: F401  (registers refengine::* that the fused ops compose)
from refengine import registry
from refengine.ops.collective import process_group  # registers refengine::all_reduce too
from refengine.ops.custom import fake

Tensor = torch.Tensor


def _run(op: str, *args: Any) -> Any:
    return registry.current().run(op, *args)


# -- native kernels of the fused ops -------------------------------------------------------


def _native_add_rms_norm(
    x: Tensor, residual: Tensor, weight: Tensor, eps: float
) -> tuple[Tensor, Tensor]:
    summed = residual.clone()
    out = _run("add_rms_norm", x, summed, weight, eps)
    return out, summed


def _native_rms_norm_fp8_quant(
    x: Tensor,
    weight: Tensor,
    eps: float,
    fp8_dtype: torch.dtype,
    mode: str,
    scale: Tensor | None,
    group_size: int,
) -> tuple[Tensor, Tensor]:
    normed = _run("rms_norm", x, weight, eps)
    return _run("fp8_quant", normed, fp8_dtype, mode, scale, group_size)  # type: ignore[no-any-return]


def _native_silu_and_mul_fp8_quant(
    x: Tensor, fp8_dtype: torch.dtype, mode: str, scale: Tensor | None, group_size: int
) -> tuple[Tensor, Tensor]:
    act = _run("silu_and_mul", x)
    return _run("fp8_quant", act, fp8_dtype, mode, scale, group_size)  # type: ignore[no-any-return]


def _native_all_reduce_rms_norm(x: Tensor, weight: Tensor, eps: float, group_name: str) -> Tensor:
    reduced = x.clone()
    dist.all_reduce(reduced, group=process_group(group_name))
    return _run("rms_norm", reduced, weight, eps)  # type: ignore[no-any-return]


# fused op -> (the op whose priority list picks its provider, {provider: kernel})
FUSED_KERNELS: dict[str, tuple[str, dict[str, Callable[..., Any]]]] = {
    "fused_add_rms_norm": ("add_rms_norm", {"native": _native_add_rms_norm}),
    "rms_norm_fp8_quant": ("fp8_quant", {"native": _native_rms_norm_fp8_quant}),
    "silu_and_mul_fp8_quant": ("fp8_quant", {"native": _native_silu_and_mul_fp8_quant}),
    "all_reduce_rms_norm": ("rms_norm", {"native": _native_all_reduce_rms_norm}),
}


def fused_provider(fused_op: str, reg: registry.Registry | None = None) -> tuple[str | None, str]:
    """(provider name, "") for the fused op under ``reg``, or (None, why none can serve it)."""
    reg = reg or registry.current()
    base_op, kernels = FUSED_KERNELS[fused_op]
    if reg.forced:
        if reg.forced in kernels:
            return reg.forced, ""
        return None, f"forced provider {reg.forced} has no {fused_op} kernel"
    for name in reg.candidates(base_op):
        if name in kernels and name not in reg.disabled:
            return name, ""
    return None, f"no provider of {fused_op} among {', '.join(reg.candidates(base_op))}"


def _kernel(fused_op: str) -> Callable[..., Any]:
    name, why = fused_provider(fused_op)
    if name is None:
        raise RuntimeError(why)
    return FUSED_KERNELS[fused_op][1][name]


@custom_op("refengine::fused_add_rms_norm", mutates_args=())
def fused_add_rms_norm(
    x: Tensor, residual: Tensor, weight: Tensor, eps: float
) -> tuple[Tensor, Tensor]:
    """(rms_norm(x + residual), x + residual): the functional form of add_rms_norm."""
    return _kernel("fused_add_rms_norm")(x, residual, weight, eps)  # type: ignore[no-any-return]


@fake("refengine::fused_add_rms_norm")
def _fused_add_rms_norm_fake(
    x: Tensor, residual: Tensor, weight: Tensor, eps: float
) -> tuple[Tensor, Tensor]:
    return torch.empty_like(x), torch.empty_like(residual)


def _quant_fake(
    x: Tensor, fp8_dtype: torch.dtype, mode: str, group_size: int
) -> tuple[Tensor, Tensor]:
    return torch.ops.refengine.fp8_quant.default(x, fp8_dtype, mode, None, group_size)  # type: ignore[no-any-return]


@custom_op("refengine::rms_norm_fp8_quant", mutates_args=())
def rms_norm_fp8_quant(
    x: Tensor,
    weight: Tensor,
    eps: float,
    fp8_dtype: torch.dtype,
    mode: str,
    scale: Tensor | None,
    group_size: int,
) -> tuple[Tensor, Tensor]:
    return _kernel("rms_norm_fp8_quant")(x, weight, eps, fp8_dtype, mode, scale, group_size)  # type: ignore[no-any-return]


@fake("refengine::rms_norm_fp8_quant")
def _rms_norm_fp8_quant_fake(
    x: Tensor,
    weight: Tensor,
    eps: float,
    fp8_dtype: torch.dtype,
    mode: str,
    scale: Tensor | None,
    group_size: int,
) -> tuple[Tensor, Tensor]:
    return _quant_fake(x, fp8_dtype, mode, group_size)


@custom_op("refengine::silu_and_mul_fp8_quant", mutates_args=())
def silu_and_mul_fp8_quant(
    x: Tensor, fp8_dtype: torch.dtype, mode: str, scale: Tensor | None, group_size: int
) -> tuple[Tensor, Tensor]:
    return _kernel("silu_and_mul_fp8_quant")(x, fp8_dtype, mode, scale, group_size)  # type: ignore[no-any-return]


@fake("refengine::silu_and_mul_fp8_quant")
def _silu_and_mul_fp8_quant_fake(
    x: Tensor, fp8_dtype: torch.dtype, mode: str, scale: Tensor | None, group_size: int
) -> tuple[Tensor, Tensor]:
    half = x.new_empty((*x.shape[:-1], x.shape[-1] // 2))
    return _quant_fake(half, fp8_dtype, mode, group_size)


@custom_op("refengine::all_reduce_rms_norm", mutates_args=())
def all_reduce_rms_norm(x: Tensor, weight: Tensor, eps: float, group_name: str) -> Tensor:
    return _kernel("all_reduce_rms_norm")(x, weight, eps, group_name)  # type: ignore[no-any-return]


@fake("refengine::all_reduce_rms_norm")
def _all_reduce_rms_norm_fake(x: Tensor, weight: Tensor, eps: float, group_name: str) -> Tensor:
    return torch.empty_like(x)
