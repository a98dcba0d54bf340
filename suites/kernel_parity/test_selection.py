"""The provider each op gets on this platform is the primary its ``kernels:`` names.

For every op the matrix lists and every dtype it runs, the expected provider is derived
from the matrix alone: the first listed provider that
- the platform has (a provider named like a capability needs it; under --emulate the
  hardware-only ones are gone, e.g. zentorch "needs hardware"), and
- is not passing this (op, dtype) on by a limit declared in declines.py (each one a
  fact about a library on a device, with its reason).
The registry, built for the device the suite runs on (the CPU under --emulate), must
choose exactly that provider for one engine-shaped call (parity_cases.SELECTION_CASES).
So a GPU matrix describes the real GPU, and under --emulate this asserts the table the
registry produces on the CPU for that profile: the same, but for the CPU-only declines.

It fails when a fallback silently becomes primary (a provider unavailable, e.g. Triton
without TRITON_INTERPRET, zentorch not importable), when the matrix lists a provider for
an op it has no kernel for, or when a declared decline no longer happens (stale entry).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from declines import DECLINES, Decline
from parity_cases import FP8_OPS, SELECTION_CASES

from refengine.ops.spec import OP_NAMES, describe
from refengine.providers import get_provider, offers
from refengine.registry import Registry


def _dtype_names(platform: Any, op: str) -> list[str]:
    if op in FP8_OPS:
        return [n for n in (platform.matrix.fp8.e4m3, platform.matrix.fp8.e5m2) if n]
    return list(platform.dtypes)


def _has_kernel(name: str, op: str, device: str) -> bool:
    return name == "native" or offers(get_provider(name, device), op)


def expected(platform: Any, op: str, dtype: str, device: str,
             problems: list[str]) -> tuple[str, list[Decline]]:
    """The provider the matrix promises for (op, dtype), and the declines on the way."""
    passed_on: list[Decline] = []
    for name in platform.matrix.kernels.get(op, ("native",)):
        if platform.known(name) and platform.why_missing(name):
            continue
        if not _has_kernel(name, op, device):
            problems.append(f"{op}: the matrix lists {name}, which has no {op} kernel")
            continue
        # A decline of some shapes or modes only (``match``) is no decline of the
        # engine-shaped call the selection is judged on.
        decline = next((d for d in DECLINES
                        if not d.match and d.applies(name, op, dtype, device)), None)
        if decline is not None:
            passed_on.append(decline)
            continue
        return str(name), passed_on
    return "native", passed_on


@pytest.mark.tier("smoke")
def test_selection_table(platform: Any, record_property: Any) -> None:
    device = torch.device(platform.device).type
    registry = Registry.for_platform(platform, use_env=False)
    rows: list[str] = []
    wrong: list[str] = []
    for op in OP_NAMES:
        if op not in platform.matrix.kernels:
            continue
        for name in _dtype_names(platform, op):
            dtype = getattr(torch, name, None)
            if dtype is None:  # e.g. an fp8 flavour this torch lacks
                continue
            fp8 = dtype if op in FP8_OPS else None
            act = torch.bfloat16 if op in FP8_OPS else dtype
            info = describe(op, SELECTION_CASES[op].args(act, fp8, "cpu", 0))
            walk = registry.explain(op, info.dtype, info.shapes, info.layout)
            got = next(c.provider for c in walk if c.chosen)
            want, declines = expected(platform, op, name, device, wrong)
            rows.append(f"{op}/{name}: {got}")
            reasons = "; ".join(f"{c.provider}: {c.reason}" for c in walk)
            if got != want:
                wrong.append(f"{op} ({name}): expected {want}, selected {got} [{reasons}]")
            for decline in declines:
                seen = next((c for c in walk if c.provider == decline.provider), None)
                if seen is None or not seen.reason.startswith("unsupported"):
                    wrong.append(f"{op} ({name}): declared decline of {decline.provider} "
                                 f"({decline.why}) did not happen [{reasons}]")
    record_property("selection", ", ".join(rows))
    how = " (emulated on the CPU)" if platform.emulate else ""
    assert not wrong, (f"{platform.name}{how}: provider selection differs from the matrix:\n"
                       + "\n".join(dict.fromkeys(wrong)))
