"""What one process sees of its CPU: torch's capability and the CPUID flags."""

from __future__ import annotations

import os
import sys
from typing import Any


def seen(*_: Any) -> dict[str, Any]:
    import torch

    from harness.platform import cpuid

    return {"capability": torch.backends.cpu.get_cpu_capability(),
            "flags": cpuid.facts()["flags"], "pid": os.getpid(), "python": sys.executable}


def on_rank(rank: int, world: int) -> dict[str, Any]:  # refengine.fusion.tp.run_ranks
    return {**seen(), "rank": rank, "world": world}
