"""The provider each op gets on this platform is the primary its ``kernels:`` names.

The expected primary is the first provider listed for the op that the platform has
(a provider named like a capability needs it; under --emulate hardware-only ones are
gone). A fallback silently becoming primary fails here with the registry's reasons.
"""

from __future__ import annotations

from typing import Any

import torch
from parity_cases import FP8_OPS, cases_for

from refengine.ops.spec import OP_NAMES, describe
from refengine.registry import Registry


def expected_primary(platform: Any, op: str) -> str:
    for name in platform.matrix.kernels.get(op, ("native",)):
        if platform.known(name) and platform.why_missing(name):
            continue
        return str(name)
    return "native"


def test_selection_table(platform: Any, record_property: Any) -> None:
    registry = Registry.from_matrix(platform.matrix, device=platform.device,
                                    emulate=platform.emulate, use_env=False)
    rows, wrong = [], []
    for op in OP_NAMES:
        if op not in platform.matrix.kernels:
            continue
        want = expected_primary(platform, op)
        if op in FP8_OPS:
            names = [n for n in (platform.matrix.fp8.e4m3, platform.matrix.fp8.e5m2) if n]
        else:
            names = list(platform.dtypes)
        for name in names:
            dtype = getattr(torch, name, None)
            if dtype is None:
                continue
            fp8 = dtype if op in FP8_OPS else None
            act = torch.bfloat16 if op in FP8_OPS else dtype
            info = describe(op, cases_for(op)[0].args(act, fp8, "cpu", 0))
            walk = registry.explain(op, info.dtype, info.shapes, info.layout)
            got = next(c.provider for c in walk if c.chosen)
            rows.append(f"{op}/{name}: {got}")
            if got != want:
                reasons = "; ".join(f"{c.provider}: {c.reason}" for c in walk)
                wrong.append(f"{op} ({name}): expected {want}, selected {got} [{reasons}]")
    record_property("selection", ", ".join(rows))
    assert not wrong, f"{platform.name}: provider selection differs from the matrix:\n" + \
        "\n".join(wrong)
