"""A fingerprint of the machine the harness runs on (not the device under test)."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

from harness.matrix.schema import CPU_FLAGS


def cpu_model_and_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str, list[str], str]:
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
    """Every flag this host's CPU reports (what a known failure's host condition reads)."""
    return frozenset(cpu_model_and_flags()[1])


def host_fingerprint() -> dict[str, object]:
    model, flags, vendor = cpu_model_and_flags()
    return {
        "machine": platform.machine(),
        "system": platform.system(),
        "kernel": platform.release(),
        "hostname": platform.node(),
        "cpu": model,
        "cpu_vendor": vendor,
        "cpu_flags": [f for f in CPU_FLAGS if f in flags],
        "cpu_count": os.cpu_count(),
        "byteorder": sys.byteorder,
        "python": platform.python_version(),
    }
