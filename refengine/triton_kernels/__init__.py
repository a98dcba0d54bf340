"""Portable Triton kernels for refengine's ops (the ``triton`` provider).

They run compiled on CUDA, ROCm and XPU tensors, and on CPU tensors through Triton's
interpreter when ``TRITON_INTERPRET=1`` is set before the kernel modules are imported.
This package's ``__init__`` imports no kernel module for that reason: import
``refengine.triton_kernels.norm`` / ``.activation`` / ``.quant`` once the environment is set.
"""

from refengine.triton_kernels._runtime import (
    CPU_HINT,
    INTERPRET_ENV,
    INTERPRETER_FP8_UNSUPPORTED,
    device_backend,
    interpret_requested,
    kernels_interpreted,
)

__all__ = [
    "CPU_HINT",
    "INTERPRETER_FP8_UNSUPPORTED",
    "INTERPRET_ENV",
    "device_backend",
    "interpret_requested",
    "kernels_interpreted",
]
