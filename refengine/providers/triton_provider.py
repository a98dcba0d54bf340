"""``triton``: portable Triton kernels (refengine/triton_kernels).

Compiled on CUDA / ROCm / XPU tensors; on CPU tensors only through Triton's interpreter,
which needs ``TRITON_INTERPRET=1`` in the environment before the kernels are imported
(the harness sets it for CPU runs; see docs/contracts.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import torch

from refengine.ops.spec import FP8_DTYPES, QUANT_MODES
from refengine.triton_kernels import _runtime

# op -> (kernel module, function); the modules are imported on first use, after the
# environment check, because TRITON_INTERPRET is read when the kernels are decorated.
KERNELS: dict[str, tuple[str, str]] = {
    "rms_norm": ("refengine.triton_kernels.norm", "rms_norm"),
    "add_rms_norm": ("refengine.triton_kernels.norm", "add_rms_norm"),
    "silu_and_mul": ("refengine.triton_kernels.activation", "silu_and_mul"),
    "fp8_quant": ("refengine.triton_kernels.quant", "fp8_quant"),
}
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
FNUZ = ("float8_e4m3fnuz", "float8_e5m2fnuz")


class TritonProvider:
    name = "triton"

    def __init__(self, device: str) -> None:
        self.device = device
        self.device_type = torch.device(device).type

    def __repr__(self) -> str:
        return f"<provider {self.name} on {self.device}>"

    def is_available(self) -> tuple[bool, str]:
        return _runtime.device_backend(self.device_type)

    def ops(self) -> tuple[str, ...]:
        return tuple(KERNELS)

    def supports(
        self, op: str, dtype: torch.dtype, shapes: Mapping[str, Any], layout: str
    ) -> tuple[bool, str]:
        # Strided inputs are handled through their strides (or a copy of leading dims
        # that cannot be merged), so ``layout`` never rules a call out.
        if op not in KERNELS:
            return False, f"triton has no {op} kernel"
        if op == "fp8_quant":
            return self._supports_fp8(dtype, shapes)
        if dtype not in FLOAT_DTYPES:
            return False, f"{op} kernels take float32/float16/bfloat16, not {dtype}"
        if op == "silu_and_mul":
            x = shapes.get("x")
            if x is not None and (len(x) == 0 or x[-1] % 2):
                return False, f"silu_and_mul needs an even last dimension, got {x}"
        return True, ""

    def _supports_fp8(self, dtype: torch.dtype, shapes: Mapping[str, Any]) -> tuple[bool, str]:
        flavour = str(dtype).removeprefix("torch.")
        if flavour not in FP8_DTYPES:
            return False, f"fp8_quant needs an fp8 dtype, got {dtype}"
        mode = shapes.get("mode")
        if mode is not None and mode not in QUANT_MODES:
            return False, f"unknown fp8_quant mode {mode!r}"
        if self._interpreted() and flavour in _runtime.INTERPRETER_FP8_UNSUPPORTED:
            why = _runtime.INTERPRETER_FP8_UNSUPPORTED[flavour]
            return False, f"Triton's interpreter cannot handle {flavour} ({why})"
        if flavour in FNUZ and not self._interpreted() and not torch.version.hip:
            return False, f"{flavour} is a ROCm (MI300) format; Triton supports it only on ROCm"
        return True, ""

    def _interpreted(self) -> bool:
        done = _runtime.kernels_interpreted()
        return _runtime.interpret_requested() if done is None else done

    def impl(self, op: str) -> Callable[..., Any]:
        if op not in KERNELS:
            raise NotImplementedError(f"triton has no {op} kernel")
        ok, reason = self.is_available()
        if not ok:
            raise RuntimeError(f"provider triton on {self.device}: {reason}")
        module_name, func = KERNELS[op]
        kernel: Callable[..., Any] = getattr(importlib.import_module(module_name), func)
        return kernel


def make_provider(device: str) -> TritonProvider:
    return TritonProvider(device)
