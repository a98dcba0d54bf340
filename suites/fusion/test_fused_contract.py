"""Every fused op the fusion passes introduce keeps its contract with the platform's
kernels: it writes no input, and returns the unfused computation's dtypes and shapes, as
its fake says (fused_contract.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from fused_contract import CASES, FusedCase, check

from refengine.fusion import fused_ops
from refengine.fusion.backend import default_pass_defs


def _marks(case: FusedCase) -> list[pytest.MarkDecorator]:
    needs = ["fp8"] if case.fp8 else []
    needs += ["gloo"] if case.fused_op == "all_reduce_rms_norm" else []
    return [pytest.mark.requires(*needs)] if needs else []


@pytest.fixture(scope="module")
def one_rank_group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A gloo process group of this process alone, for the collective fused ops."""
    import torch.distributed as dist

    if dist.is_initialized():
        yield
        return
    path: Path = tmp_path_factory.mktemp("group") / "rendezvous"
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_every_fused_op_has_contract_cases() -> None:
    introduced = {d.fused_op for d in default_pass_defs()}
    missing = sorted(introduced - {case.fused_op for case in CASES})
    assert not missing, f"fused ops with no contract cases in fused_contract.py: {missing}"


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c.fused_op}-{c.id}", marks=_marks(c))
                                  for c in CASES])
def test_fused_op_contract(case: FusedCase, platform: Any, platform_dtype: str, seed: int,
                           request: pytest.FixtureRequest, record_property: Any) -> None:
    provider, why = fused_ops.fused_provider(case.fused_op)
    if provider is None:
        pytest.skip(why)
    record_property("op", case.fused_op)
    record_property("provider", provider)
    if case.fused_op == "all_reduce_rms_norm":
        request.getfixturevalue("one_rank_group")
    fp8 = getattr(torch, platform.matrix.fp8.e4m3) if case.fp8 else None
    check(case, getattr(torch, platform_dtype), fp8, seed)
