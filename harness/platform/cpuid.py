"""The CPU as this process sees it: the CPUID instruction, not ``/proc/cpuinfo``.

Under qemu-user (a lane's emulated CPU, platform/cpu_emulation.py) ``/proc/cpuinfo`` is the
host's file, so it shows the host's flags (avx512f on an AVX-512 agent), while CPUID, which
qemu emulates, answers as the emulated model does; torch and vLLM choose their kernels
from CPUID. This module executes CPUID itself (a few bytes of x86-64 machine code called
through ctypes) and names the flags harness reads as Linux does.

Standard library only, and runnable as a script (``python cpuid.py`` prints the facts as
``lscpu -J`` would, for the lscpu probe), so it can be run by any interpreter of a lane,
harness installed there or not.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import platform
import struct
import sys

# cpuid(leaf=edi, subleaf=esi, out=rdx): eax, ebx, ecx, edx into out[0..3]; rbx saved.
_CODE = bytes.fromhex(
    "53"          # push rbx
    "89f8"        # mov eax, edi
    "89f1"        # mov ecx, esi
    "4989d0"      # mov r8, rdx
    "0fa2"        # cpuid
    "418900"      # mov [r8], eax
    "41895804"    # mov [r8+4], ebx
    "41894808"    # mov [r8+8], ecx
    "4189500c"    # mov [r8+12], edx
    "5b"          # pop rbx
    "c3"          # ret
)
# (leaf, subleaf, register index 0-3 for eax..edx, bit) -> the flag's name in /proc/cpuinfo
FLAGS = {
    (1, 0, 2, 0): "pni", (1, 0, 2, 9): "ssse3", (1, 0, 2, 12): "fma",
    (1, 0, 2, 19): "sse4_1", (1, 0, 2, 20): "sse4_2", (1, 0, 2, 22): "movbe",
    (1, 0, 2, 23): "popcnt", (1, 0, 2, 28): "avx", (1, 0, 2, 29): "f16c",
    (1, 0, 3, 25): "sse", (1, 0, 3, 26): "sse2",
    (7, 0, 1, 3): "bmi1", (7, 0, 1, 5): "avx2", (7, 0, 1, 8): "bmi2",
    (7, 0, 1, 16): "avx512f", (7, 0, 1, 17): "avx512dq", (7, 0, 1, 21): "avx512ifma",
    (7, 0, 1, 28): "avx512cd", (7, 0, 1, 30): "avx512bw", (7, 0, 1, 31): "avx512vl",
    (7, 0, 2, 1): "avx512vbmi", (7, 0, 2, 6): "avx512_vbmi2", (7, 0, 2, 11): "avx512_vnni",
    (7, 0, 2, 12): "avx512_bitalg", (7, 0, 2, 14): "avx512_vpopcntdq",
    (7, 0, 3, 22): "amx_bf16", (7, 0, 3, 23): "avx512_fp16", (7, 0, 3, 24): "amx_tile",
    (7, 0, 3, 25): "amx_int8",
    (7, 1, 0, 4): "avx_vnni", (7, 1, 0, 5): "avx512_bf16", (7, 1, 0, 21): "amx_fp16",
}


class _Cpuid:
    def __init__(self) -> None:
        self._mem = mmap.mmap(-1, mmap.PAGESIZE,
                              prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self._mem.write(_CODE)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self._mem))
        kind = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32,
                                ctypes.POINTER(ctypes.c_uint32))
        self._call = kind(address)

    def __call__(self, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        out = (ctypes.c_uint32 * 4)()
        self._call(leaf, subleaf, out)
        return out[0], out[1], out[2], out[3]


def facts() -> dict[str, object]:
    """``{vendor, model, flags}`` as CPUID answers here; flags empty off x86-64."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return {"vendor": "", "model": platform.processor(), "flags": []}
    cpuid = _Cpuid()
    top, ebx, ecx, edx = cpuid(0)
    vendor = struct.pack("<III", ebx, edx, ecx).decode("ascii", "replace")
    regs = {(leaf, sub): cpuid(leaf, sub) for leaf, sub in ((1, 0), (7, 0), (7, 1))
            if leaf <= top}
    flags = [name for (leaf, sub, reg, bit), name in FLAGS.items()
             if (leaf, sub) in regs and regs[(leaf, sub)][reg] >> bit & 1]
    ext = cpuid(0x80000000)[0]
    brand = b"".join(struct.pack("<IIII", *cpuid(leaf)) for leaf in
                     (0x80000002, 0x80000003, 0x80000004) if leaf <= ext)
    model = brand.split(b"\0", 1)[0].decode("ascii", "replace").strip()
    return {"vendor": vendor, "model": model, "flags": sorted(flags)}


def as_lscpu(found: dict[str, object]) -> str:
    """The facts as ``lscpu -J`` prints them (what the lscpu probe parses)."""
    flags = found["flags"]
    assert isinstance(flags, list)
    rows = [{"field": "Architecture:", "data": platform.machine()},
            {"field": "Vendor ID:", "data": found["vendor"]},
            {"field": "Model name:", "data": found["model"]},
            {"field": "Flags:", "data": " ".join(flags)}]
    return json.dumps({"lscpu": rows})


if __name__ == "__main__":
    print(as_lscpu(facts()) if "--lscpu" in sys.argv[1:] else json.dumps(facts()))
