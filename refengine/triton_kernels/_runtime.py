"""Where the Triton kernels can run, and how the CPU path through the interpreter works.

Triton reads ``TRITON_INTERPRET`` when a kernel is *decorated* (``@triton.jit`` picks the
interpreter or the compiler at that moment), so the variable must be set before the kernel
modules of this package are imported. The modules are therefore imported lazily by the
provider, after this module has checked the environment.
"""

from __future__ import annotations

import importlib.util
import os

INTERPRET_ENV = "TRITON_INTERPRET"
CPU_HINT = "set TRITON_INTERPRET=1 to run Triton kernels on the CPU"

# The interpreter (triton 3.6.0) has no IR type for the fnuz fp8 flavours: any kernel that
# touches them fails with "fail to convert fp8e4b8 to ir type" (fp8e5b16 for e5m2fnuz).
INTERPRETER_FP8_UNSUPPORTED = {
    "float8_e4m3fnuz": "fail to convert fp8e4b8 to ir type",
    "float8_e5m2fnuz": "fail to convert fp8e5b16 to ir type",
}


def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def interpret_requested() -> bool:
    return os.environ.get(INTERPRET_ENV, "").strip().lower() in ("1", "true", "on", "yes")


def kernels_interpreted() -> bool | None:
    """Whether the already-imported kernels were decorated for the interpreter.

    None when the kernel modules have not been imported yet (the environment decides then).
    """
    import sys

    norm = sys.modules.get("refengine.triton_kernels.norm")
    if norm is None:
        return None
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(norm.rms_norm_kernel, InterpretedFunction)


def device_backend(device_type: str) -> tuple[bool, str]:
    """Can Triton launch kernels on tensors of this torch device type here?"""
    if not triton_installed():
        return False, "triton is not installed"
    interpreted = kernels_interpreted()
    if interpreted is None:
        interpreted = interpret_requested()
    if device_type == "cpu":
        if not interpreted:
            if kernels_interpreted() is False:
                return False, (
                    f"{CPU_HINT} (the kernels were already imported without it; "
                    "set it before refengine.triton_kernels is imported)"
                )
            return False, CPU_HINT
        return True, "Triton interpreter (TRITON_INTERPRET=1)"
    if interpreted:
        return True, f"Triton interpreter on {device_type} tensors (TRITON_INTERPRET=1)"
    if device_type in ("cuda", "xpu"):
        # torch.version.hip marks a ROCm build, which also reports its GPUs as "cuda".
        import torch

        mod = getattr(torch, device_type)
        if not mod.is_available():
            return False, f"torch.{device_type}.is_available() is False"
        return (
            True,
            "Triton compiler (ROCm)" if torch.version.hip else f"Triton compiler ({device_type})",
        )
    return False, f"Triton has no backend for {device_type!r} tensors"
