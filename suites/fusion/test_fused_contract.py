"""Every fused op the fusion passes introduce keeps its contract with the platform's
kernels: it writes no input, and returns the unfused computation's dtypes and shapes, as
its fake says (fused_contract.py). A collective op's case runs on two gloo ranks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from fused_contract import CASES, FusedCase, check, check_on_ranks

from refengine.fusion import fused_ops
from refengine.fusion.backend import default_pass_defs


def _marks(case: FusedCase) -> list[pytest.MarkDecorator]:
    needs = ["fp8"] if case.fp8 else []
    needs += ["gloo"] if case.world > 1 else []
    return [pytest.mark.requires(*needs)] if needs else []


def test_every_fused_op_has_contract_cases() -> None:
    introduced = {d.fused_op for d in default_pass_defs()}
    missing = sorted(introduced - {case.fused_op for case in CASES})
    assert not missing, f"fused ops with no contract cases in fused_contract.py: {missing}"


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c.fused_op}-{c.id}", marks=_marks(c))
                                  for c in CASES])
def test_fused_op_contract(case: FusedCase, platform: Any, platform_dtype: str, seed: int,
                           platform_registry: Any, tmp_path: Path,
                           record_property: Any) -> None:
    provider, why = fused_ops.fused_provider(case.fused_op)
    if provider is None:
        pytest.skip(why)
    record_property("op", case.fused_op)
    record_property("provider", provider)
    fp8 = getattr(torch, platform.matrix.fp8.e4m3) if case.fp8 else None
    if case.world > 1:
        record_property("ranks", case.world)
        check_on_ranks(case, getattr(torch, platform_dtype), fp8, seed, platform_registry,
                       tmp_path)
    else:
        check(case, getattr(torch, platform_dtype), fp8, seed)
