"""The triton provider's kernels against refengine's fp32 references, on the CPU.

They run through Triton's interpreter, which must be switched on before the kernel
modules are decorated; this module sets TRITON_INTERPRET=1 at import unless a GPU run
chose otherwise. Shapes stay small: the interpreter runs numpy per program.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

pytest.importorskip("triton")

from refengine.ops import reference as ref
from refengine.providers import triton_provider
from refengine.triton_kernels import _runtime

PROVIDER = triton_provider.make_provider("cpu")
TOL = {torch.float32: (1e-5, 1.3e-6), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1e-3, 1.6e-2)}
FLOATS = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(3, 40), (2, 3, 33), (1, 1), (2, 5000)]  # 5000 > one 4096 tile: the loop runs twice
LAYOUTS = ["contiguous", "sliced", "transposed"]


def make(shape: tuple[int, ...], dtype: torch.dtype, layout: str) -> torch.Tensor:
    if layout == "contiguous":
        return torch.randn(shape).to(dtype)
    if layout == "sliced":
        return torch.randn(*shape[:-1], shape[-1] + 5).to(dtype)[..., : shape[-1]]
    # leading dims swapped (a 3-D one cannot be merged without a copy)
    full = torch.randn(*reversed(shape[:-1]), shape[-1]).to(dtype)
    return full.transpose(0, -2) if len(shape) > 1 else full


def assert_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    atol, rtol = TOL[expected.dtype]
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)


def test_cpu_needs_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    assert PROVIDER.is_available() == (True, "Triton interpreter (TRITON_INTERPRET=1)")
    monkeypatch.setattr(_runtime, "kernels_interpreted", lambda: None)
    monkeypatch.delenv("TRITON_INTERPRET")
    assert PROVIDER.is_available() == (False, _runtime.CPU_HINT)


def test_supports_names_the_reason() -> None:
    assert PROVIDER.supports("linear", torch.float32, {}, "contiguous") == (
        False,
        "triton has no linear kernel",
    )
    ok, why = PROVIDER.supports("fp8_quant", torch.float8_e4m3fnuz, {}, "contiguous")
    assert not ok and "fp8e4b8" in why
    ok, why = PROVIDER.supports("silu_and_mul", torch.float32, {"x": (3, 5)}, "contiguous")
    assert not ok and "even" in why
    assert PROVIDER.supports("rms_norm", torch.bfloat16, {}, "strided") == (True, "")


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_rms_norm(dtype: torch.dtype, shape: tuple[int, ...], layout: str) -> None:
    torch.manual_seed(0)
    x = make(shape, dtype, layout)
    w = torch.randn(shape[-1]).to(dtype)
    before = x.clone()
    assert_close(PROVIDER.impl("rms_norm")(x, w, 1e-6), ref.rms_norm(x, w, 1e-6))
    assert torch.equal(x, before)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_add_rms_norm(dtype: torch.dtype, shape: tuple[int, ...], layout: str) -> None:
    torch.manual_seed(0)
    x = make(shape, dtype, layout)
    residual = make(shape, dtype, layout)
    w = torch.randn(shape[-1]).to(dtype)
    x_before, res_expected = x.clone(), residual.clone()
    expected = ref.add_rms_norm(x, res_expected, w, 1e-6)
    out = PROVIDER.impl("add_rms_norm")(x, residual, w, 1e-6)
    assert torch.equal(x, x_before)
    # The sum is rounded once to the residual dtype, in both: bit-identical.
    assert torch.equal(residual, res_expected)
    assert_close(out, expected)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shape", [(3, 40), (2, 3, 66), (1, 2)], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_silu_and_mul(dtype: torch.dtype, shape: tuple[int, ...], layout: str) -> None:
    torch.manual_seed(0)
    x = make(shape, dtype, layout)
    assert_close(PROVIDER.impl("silu_and_mul")(x), ref.silu_and_mul(x))


def test_bf16_outputs_round_to_nearest_even() -> None:
    # The interpreter's own fp32 -> bf16 cast truncates; the kernels round first.
    x = torch.randn(4, 512, dtype=torch.bfloat16)
    w = torch.ones(512, dtype=torch.bfloat16)
    assert torch.equal(PROVIDER.impl("rms_norm")(x, w, 1e-6), ref.rms_norm(x, w, 1e-6))


FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]
MODES = ["per_tensor_static", "per_tensor_dynamic", "per_token_dynamic", "block"]


@pytest.mark.parametrize("fp8", FP8, ids=str)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(3, 256), (2, 3, 200), (4, 1)], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_fp8_quant_bit_exact(
    fp8: torch.dtype, mode: str, shape: tuple[int, ...], layout: str
) -> None:
    torch.manual_seed(0)
    x = make(shape, torch.bfloat16, layout) * 30
    x[(0,) * x.dim()] = 0  # an exact zero must stay zero
    scale = torch.tensor([0.05])
    q, s = PROVIDER.impl("fp8_quant")(x, fp8, mode, scale, 128)
    q_ref, s_ref = ref.fp8_quant(x, fp8, mode, scale, 128)
    assert torch.equal(s, s_ref)
    assert q.dtype == fp8 and q.shape == q_ref.shape
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))


@pytest.mark.parametrize("fp8", FP8, ids=str)
def test_fp8_rounding_matches_torch_on_every_value(fp8: torch.dtype) -> None:
    # Every finite fp8 value, the midpoints between neighbours (ties go to even), values
    # whose rounding carries into the next binade, subnormals and out-of-range values.
    grid = torch.arange(256, dtype=torch.uint8).view(fp8).float()
    grid = grid[grid.isfinite()].unique()
    x = torch.cat([grid, (grid[1:] + grid[:-1]) / 2, torch.tensor([31.9, -1.99, 1e-4, 1e6])])
    one = torch.ones(1)
    q, _ = PROVIDER.impl("fp8_quant")(x.reshape(1, -1), fp8, "per_tensor_static", one, 128)
    expected = x.clamp(-torch.finfo(fp8).max, torch.finfo(fp8).max).to(fp8)
    assert torch.equal(q.view(torch.uint8).flatten(), expected.view(torch.uint8))
