"""The refengine:: custom ops: graph nodes under torch.compile, fakes that match native."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import refengine.ops as ops
from refengine.ops import reference
from refengine.ops.spec import OP_NAMES

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "suites" / "kernel_parity"))
from parity_cases import FP8_OPS, all_cases


def test_every_op_has_a_case_and_a_custom_op() -> None:
    assert {c.op for c in all_cases()} == set(OP_NAMES)
    for op in OP_NAMES:
        assert hasattr(torch.ops.refengine, op)


@pytest.mark.parametrize("case", all_cases(), ids=lambda c: f"{c.op}-{c.id}")
def test_fake_matches_native(case: Any) -> None:
    fp8 = torch.float8_e4m3fn if case.op in FP8_OPS else None
    args = case.args(torch.bfloat16, fp8, "cpu", 0)
    real = getattr(reference, case.op)(*case.args(torch.bfloat16, fp8, "cpu", 0))
    real = real if isinstance(real, tuple) else (real,)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake_args = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a
                          for a in args)
        fake = getattr(torch.ops.refengine, case.op)(*fake_args)
    fake = fake if isinstance(fake, tuple) else (fake,)
    assert [(f.shape, f.dtype) for f in fake] == [(r.shape, r.dtype) for r in real]


def test_ops_stay_graph_nodes_under_compile() -> None:
    seen: list[Any] = []

    def backend(gm: torch.fx.GraphModule, inputs: Any) -> Any:
        seen.extend(n.target for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    def block(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return ops.silu_and_mul(ops.add_rms_norm(x, r, w))

    x, r, w = torch.randn(4, 16), torch.randn(4, 16), torch.ones(16)
    r0 = r.clone()
    out = torch.compile(block, backend=backend, fullgraph=True)(x, r, w)
    names = {str(t).removesuffix(".default") for t in seen}
    assert {"refengine.add_rms_norm", "refengine.silu_and_mul"} <= names
    assert torch.equal(r, x + r0)  # the declared mutation survives functionalization
    assert out.shape == (4, 8)


def test_add_rms_norm_equals_add_then_rms_norm_bitwise() -> None:
    x, r, w = (torch.randn(5, 96, dtype=torch.bfloat16) for _ in range(3))
    summed = x + r
    out = ops.add_rms_norm(x, r, w, 1e-6)
    assert torch.equal(r, summed)
    assert torch.equal(out, ops.rms_norm(summed, w, 1e-6))


def test_fp8_quant_clamps_before_the_cast_for_every_flavour() -> None:
    x = torch.tensor([[1e6, -1e6, 250.0, 1.0]])
    for dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2,
                  torch.float8_e5m2fnuz):
        q, _ = ops.fp8_quant(x, dtype, "per_tensor_static", torch.tensor([1.0]))
        fmax = torch.finfo(dtype).max
        assert q.float().tolist()[0][:2] == [fmax, -fmax], dtype
        assert not q.float().isnan().any()
