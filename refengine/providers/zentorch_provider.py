"""``zentorch``: AMD's ZenDNN plugin (``torch.ops.zentorch``) on Zen CPUs.

zentorch 2.14.0.1 only runs with torch 2.14.x, so this provider is available in an
environment built for it (the zen image, or a dev venv); elsewhere it says why not.

Argument contracts, from each op's schema and zentorch's own tests:
- zentorch_mm(self, mat2) / zentorch_addmm_1dbias(bias, mat1, mat2): 2-D only
  ("unsupported dims" otherwise), so ``linear`` flattens the leading dims.
- zentorch_rms_norm(input, weight, epsilon) -> new tensor.
- zentorch_add_rms_norm_(input!, weight, residual!, epsilon) -> (): writes the normed
  output into ``input`` and x + residual into ``residual``. Our contract forbids writing
  ``x``, so the op gets a copy of it.
- zentorch_fused_moe(output!, input, w13, w2, w13_bias, w2_bias, topk_weights, topk_id
  int32, skip_weighted, act): experts only; routing is done here in fp32 like native.
  It caches expert weights by address and serves stale ones after the weights change
  in place, even after zentorch_flush_moe_weight_cache() (a finding, see
  tests/kernels/test_zentorch_provider.py): weights must not be updated in place.
- zentorch_dynamic_qlinear(input float, weight int8 [N, K], weight_scales [1, N], bias):
  per-token symmetric int8 quantisation of the input inside the op; needs K % 4 == 0.
  refengine has no dynamic-w8a8 op yet, so it is offered as ``dynamic_int8_linear``.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

import torch

from refengine.ops.reference import route

DTYPES = (torch.float32, torch.bfloat16)
TORCH_SERIES = "2.14."


@functools.cache
def _import_zentorch() -> tuple[bool, str]:
    if importlib.util.find_spec("zentorch") is None:
        return False, "zentorch is not installed (pip install zentorch==2.14.0.1)"
    if not torch.__version__.startswith(TORCH_SERIES):
        return False, f"zentorch needs torch {TORCH_SERIES}x, this is torch {torch.__version__}"
    try:
        import zentorch  # noqa: F401  (registers torch.ops.zentorch)
    except Exception as error:  # its import runs native code: report, never crash
        return False, f"import zentorch failed: {type(error).__name__}: {error}"
    return True, ""


def cpu_vendor() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


class ZentorchProvider:
    name = "zentorch"

    def __init__(self, device: str) -> None:
        self.device = device

    def __repr__(self) -> str:
        return f"<provider {self.name} on {self.device}>"

    def is_available(self) -> tuple[bool, str]:
        if torch.device(self.device).type != "cpu":
            return False, f"zentorch runs on the CPU, not {self.device}"
        vendor = cpu_vendor()
        if vendor != "AuthenticAMD":
            return False, f"zentorch targets AMD Zen CPUs; this CPU is {vendor}"
        return _import_zentorch()

    def ops(self) -> tuple[str, ...]:
        return tuple(_IMPLS)

    def supports(
        self, op: str, dtype: torch.dtype, shapes: Mapping[str, Any], layout: str
    ) -> tuple[bool, str]:
        if op not in _IMPLS:
            return False, f"zentorch has no {op} kernel"
        if dtype not in DTYPES:
            return False, f"zentorch {op} takes float32/bfloat16, not {dtype}"
        if op == "fused_moe" and len(shapes.get("x", (0, 0))) != 2:
            return False, "fused_moe takes x as [T, H]"
        return True, ""

    def impl(self, op: str) -> Callable[..., Any]:
        if op not in _IMPLS:
            raise NotImplementedError(f"zentorch has no {op} kernel")
        ok, reason = self.is_available()
        if not ok:
            raise RuntimeError(f"provider zentorch: {reason}")
        return _IMPLS[op]


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    zen = torch.ops.zentorch
    rows = x.reshape(-1, x.shape[-1])
    out: torch.Tensor
    if bias is None:
        out = zen.zentorch_mm(rows, weight.t())
    else:
        out = zen.zentorch_addmm_1dbias(bias, rows, weight.t())
    return out.reshape(*x.shape[:-1], weight.shape[0])


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    out: torch.Tensor = torch.ops.zentorch.zentorch_rms_norm(x, weight, eps)
    return out


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    out = x.clone()
    torch.ops.zentorch.zentorch_add_rms_norm_(out, weight, residual, eps)
    return out


def fused_moe(
    x: torch.Tensor,
    router_logits: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    top_k: int,
    renormalize: bool,
) -> torch.Tensor:
    zen = torch.ops.zentorch
    weights, ids = route(router_logits, top_k, renormalize)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    zen.zentorch_fused_moe(out, x, w13, w2, None, None, weights, ids.to(torch.int32), False, "silu")
    return out


def dynamic_int8_linear(
    x: torch.Tensor, weight: torch.Tensor, weight_scales: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """x float [T..., K] quantised per token inside the op; weight int8 [N, K]; scales [N]."""
    out: torch.Tensor = torch.ops.zentorch.zentorch_dynamic_qlinear(
        x, weight, weight_scales.reshape(1, -1), bias
    )
    return out


_IMPLS: dict[str, Callable[..., Any]] = {
    "linear": linear,
    "rms_norm": rms_norm,
    "add_rms_norm": add_rms_norm,
    "fused_moe": fused_moe,
}


def make_provider(device: str) -> ZentorchProvider:
    return ZentorchProvider(device)
