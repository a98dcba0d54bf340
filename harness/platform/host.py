"""A fingerprint of the machine the harness runs on (not the device under test)."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path

from harness.matrix.schema import CPU_FLAGS
from harness.results.facts import HostRecord

EMULATED_ENV = "HARNESS_EMULATED_CPU"  # set inside a lane's emulated CPU (cpu_emulation.py)
# set where a lane's image is of another architecture than the host's (qemu-user runs it;
# runners/suite_env.py foreign_arch)
FOREIGN_ENV = "HARNESS_FOREIGN_ARCH"


def cpu_model_and_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str, list[str], str]:
    """(model, flags, vendor) of the CPU this process runs on. Inside a lane's emulated CPU
    (platform/cpu_emulation.py sets its variable) ``/proc/cpuinfo`` is the host's: CPUID
    answers as the emulated CPU does, as torch and the kernel libraries see it."""
    if os.environ.get(EMULATED_ENV):
        from harness.platform import cpuid

        found = cpuid.facts()
        return str(found["model"]), list(found["flags"]), str(found["vendor"])  # type: ignore[call-overload]
    model, vendor = "", ""
    flags: list[str] = []
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return platform.processor(), [], ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "vendor_id" and not vendor:
            vendor = value.strip()
        elif key == "flags" and not flags:
            flags = value.split()
    return model, flags, vendor


def cpu_flags() -> frozenset[str]:
    """Every flag this host's CPU reports."""
    return frozenset(cpu_model_and_flags()[1])


# oneDNN's ISA levels (ONEDNN_MAX_CPU_ISA, oneDNN's documented cap on what it dispatches
# to), lowest first, and the level that brings each CPU_FLAGS flag into use.
ONEDNN_ISA = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE",
              "AVX512_CORE_VNNI", "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX",
              "AVX512_CORE_AMX_FP16")
_ALIASES = {"AVX10_1_512": "AVX512_CORE_FP16", "AVX10_1_512_AMX": "AVX512_CORE_AMX",
            "AVX10_1_512_AMX_FP16": "AVX512_CORE_AMX_FP16"}
FLAG_ISA = {"avx2": "AVX2", "avx_vnni": "AVX2_VNNI", "avx512f": "AVX512_CORE",
            "avx512_vnni": "AVX512_CORE_VNNI", "avx512_bf16": "AVX512_CORE_BF16",
            "avx512_fp16": "AVX512_CORE_FP16", "amx_tile": "AVX512_CORE_AMX",
            "amx_int8": "AVX512_CORE_AMX", "amx_bf16": "AVX512_CORE_AMX",
            "amx_fp16": "AVX512_CORE_AMX_FP16"}


def kernel_cpu_flags(flags: frozenset[str], env: Mapping[str, str]) -> frozenset[str]:
    """The CPU flags as the kernel libraries see them: ``flags`` less those above
    ``ONEDNN_MAX_CPU_ISA`` where that cap is set (how a matrix runs the kernels of a
    smaller CPU on this one: vllm-cpu-avx2 is an AVX2-only host on any x86-64 CPU).
    What a known failure's host condition reads."""
    cap = env.get("ONEDNN_MAX_CPU_ISA", "").upper()
    cap = _ALIASES.get(cap, cap)
    if cap not in ONEDNN_ISA:
        return flags  # unset, ALL, DEFAULT: oneDNN uses what the CPU has
    level = ONEDNN_ISA.index(cap)
    return frozenset(f for f in flags
                     if f not in FLAG_ISA or ONEDNN_ISA.index(FLAG_ISA[f]) <= level)


def host_fingerprint(emulated: Mapping[str, object] | None = None,
                     left_out: Mapping[str, str] | None = None) -> HostRecord:
    """The host; with ``emulated`` (platform/cpu_emulation.py ``facts``: the lane's CPU as
    CPUID answers inside qemu), the CPU its suites see, the agent's own CPU beside it, and
    the agent's host-tuned CPU settings the emulated CPU did not get (``left_out``)."""
    model, flags, vendor = cpu_model_and_flags()
    agent, option = "", os.environ.get(EMULATED_ENV, "")  # inside the emulation: its model
    if emulated is not None:
        agent, option = model, str(emulated.get("option", ""))
        model, vendor = str(emulated["model"]), str(emulated["vendor"])
        flags = [str(f) for f in emulated["flags"]]  # type: ignore[attr-defined]
    return HostRecord(
        machine=platform.machine(),
        system=platform.system(),
        kernel=platform.release(),
        hostname=platform.node(),
        cpu=model,
        cpu_vendor=vendor,
        cpu_flags=[f for f in CPU_FLAGS if f in flags],
        cpu_count=os.cpu_count(),
        byteorder=sys.byteorder,
        python=platform.python_version(),
        cpu_emulated=option,
        agent_cpu=agent,
        agent_env_left_out=dict(left_out or {}),
    )
