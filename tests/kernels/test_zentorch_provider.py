"""zentorch against the fp32 reference (refengine.ops.reference) with vLLM's tolerances.

Runs for real only where zentorch imports (torch 2.14.x, AMD CPU), e.g. the dev venv
described in the report of issue 3:
    <zen venv>/bin/python -m pytest tests/kernels/test_zentorch_provider.py
Elsewhere it skips with the provider's reason. A failure here is a finding about zentorch:
the message names op, dtype, shape, layout and the max abs / rel error.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from refengine.ops import reference as ref
from refengine.providers import get_provider
from refengine.providers import zentorch_provider as zp

PROVIDER = zp.make_provider("cpu")
AVAILABLE, WHY = PROVIDER.is_available()
needs_zentorch = pytest.mark.skipif(not AVAILABLE, reason=f"zentorch unavailable: {WHY}")

# vLLM's default parity tolerances: (atol, rtol)
TOL = {torch.float32: (1e-5, 1.3e-6), torch.bfloat16: (1e-3, 1.6e-2)}
DTYPES = [pytest.param(torch.float32, id="fp32"), pytest.param(torch.bfloat16, id="bf16")]


def check_close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    atol, rtol = TOL[expected.dtype]
    a, e = actual.float(), expected.float()
    diff = (a - e).abs()
    bad = diff > atol + rtol * e.abs()
    nan_mismatch = a.isnan() != e.isnan()
    if bad.any() or nan_mismatch.any():
        rel = (diff / e.abs().clamp_min(1e-30)).max().item()
        raise AssertionError(
            f"{what}: {int(bad.sum())}/{bad.numel()} elements out of tolerance "
            f"(atol={atol}, rtol={rtol}): max_abs={diff.max().item():.3g} max_rel={rel:.3g}"
        )


def strided(
    make: Callable[[tuple[int, ...]], torch.Tensor], shape: tuple[int, ...], layout: str
) -> torch.Tensor:
    """A tensor of ``shape``: contiguous, a slice of a wider one, or a transposed view."""
    if layout == "contiguous":
        return make(shape)
    if layout == "strided":
        return make((*shape[:-1], shape[-1] + 7))[..., : shape[-1]]
    if layout == "transposed":
        return make(tuple(reversed(shape))).t() if len(shape) == 2 else make(shape)
    raise ValueError(layout)


def randn(dtype: torch.dtype, scale: float = 1.0) -> Callable[[tuple[int, ...]], torch.Tensor]:
    return lambda shape: (torch.randn(shape) * scale).to(dtype)


# Findings (zentorch 2.14.0.1, torch 2.14.1, AMD EPYC Zen 4 with avx512_bf16, 2 threads).
# Each one is a strict xfail: the day zentorch fixes it, the test XPASSes and fails.
MM_BF16_TRANSPOSED = (
    "FINDING: zentorch_mm/zentorch_addmm_1dbias in bf16 with K=64, N=48 rewrite mat2 (the "
    "weight) in place, by up to 0.76; the product itself is right, but the reference computed "
    "after the call reads the rewritten weight (M=10: max_abs 4.58). The same for aligned "
    "fp32 shapes (x[32,256] w[512,256], kernel_parity linear-aligned-k256-n512); odd K/N are "
    "left alone"
)
NORM_3D = (
    "FINDING: zentorch_rms_norm / zentorch_add_rms_norm_ on a 3-D input normalise only the "
    "first shape[0] rows; the rest of the output is uninitialised memory (fp32 [2,3,128]: "
    "max_abs 3e35, bf16: NaN)"
)
NORM_STRIDED = (
    "FINDING: zentorch_rms_norm / zentorch_add_rms_norm_ ignore the input's strides and read "
    "a row-sliced tensor as if contiguous (fp32 [5,67] slice of [5,74]: max_abs 8.34)"
)
MOE_BF16 = (
    "FINDING: zentorch_fused_moe in bf16 disagrees with the fp32 reference even on the first "
    "call in a fresh process (T5 H64 I32 E4 k2: max_abs 1.35 against a reference computed "
    "after the call, on the weights the call overwrote, see MOE_WRITES_WEIGHTS; against the "
    "original weights max_abs 0.0156 in kernel_parity; fp32 is within 6e-6)"
)
MOE_STALE = (
    "FINDING: zentorch_fused_moe caches expert weights by address and serves stale ones after "
    "w13 changes in place, even after zentorch_flush_moe_weight_cache() (fp32 T5 H64 I32 E4 "
    "k2: max_abs 1.05)"
)

MOE_WRITES_WEIGHTS = (
    "FINDING: zentorch_fused_moe in bf16 writes into its weight inputs (kernel_parity "
    "top2-renorm [T7 H64 I48 E4 k2]: w13 and w2 change by up to 0.79); so a reference computed "
    "after the call sees other weights (the max_abs 1.35 first seen)"
)
MM_STALE = (
    "FINDING: zentorch_mm caches packed weights by address: after the weight buffer gets new "
    "values in place it still multiplies by the old ones (fp32 x[8,64] w[32,64]: max_abs 42.9)"
)
DQ_STALE = (
    "FINDING: zentorch_dynamic_qlinear caches the int8 weight by address: after the weight "
    "buffer gets new values in place it returns the old result (fp32 x[1,4] w[1,4]: "
    "max_abs 0.165, bf16 0.547)"
)
# zentorch caches weights by address (the *_STALE findings): a fresh weight allocated where
# an earlier test's weight of the same shape lived gets that weight's result, so a test's
# outcome would depend on what ran before it. Every weight any test here hands to zentorch
# is kept alive, so no later test's weight can take its address. test_dynamic_int8_linear
# was quarantined (non-strict xfail) for this: its [bias-contiguous-(1, 4)-1-fp32] case once
# got another weight's result, most likely the in-place test's [1, 4] weight, which was not
# kept alive then. The cache bug itself is what the *_in_place tests record.
_LIVE_WEIGHTS: list[torch.Tensor] = []


def keep_alive(*tensors: torch.Tensor) -> None:
    _LIVE_WEIGHTS.extend(tensors)


def expect_finding(request: pytest.FixtureRequest, reason: str | None) -> None:
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


def norm_finding(shape: tuple[int, ...], layout: str) -> str | None:
    if len(shape) > 2:
        return NORM_3D
    if layout == "strided" and shape[0] > 1:
        return NORM_STRIDED
    return None


def test_unavailable_reason_is_specific() -> None:
    if AVAILABLE:
        assert WHY == ""
    else:
        assert WHY and ("zentorch" in WHY or "AMD" in WHY)
    assert get_provider("zentorch", "cpu").name == "zentorch"


def test_supports_declares_dtypes_and_ops() -> None:
    assert PROVIDER.supports("rms_norm", torch.float16, {}, "contiguous")[0] is False
    ok, why = PROVIDER.supports("silu_and_mul", torch.float32, {}, "contiguous")
    assert not ok and "no silu_and_mul" in why
    assert PROVIDER.supports("linear", torch.bfloat16, {}, "strided") == (True, "")
    assert PROVIDER.is_available()[0] is AVAILABLE
    assert zp.make_provider("cuda").is_available()[0] is False


LINEAR_SHAPES = [((7, 33), 19), ((2, 5, 64), 48), ((1, 1), 1), ((3, 129), 65)]


@needs_zentorch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("x_shape", "n"), LINEAR_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("x_layout", ["contiguous", "strided"])
@pytest.mark.parametrize("w_layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_linear(
    request: pytest.FixtureRequest,
    dtype: torch.dtype,
    x_shape: tuple[int, ...],
    n: int,
    x_layout: str,
    w_layout: str,
    bias: bool,
) -> None:
    torch.manual_seed(0)
    k = x_shape[-1]
    if dtype == torch.bfloat16 and (k, n) == (64, 48):
        expect_finding(request, MM_BF16_TRANSPOSED)
    x = strided(randn(dtype), x_shape, x_layout)
    w = strided(randn(dtype, k**-0.5), (n, k), w_layout)
    b = torch.randn(n).to(dtype) if bias else None
    keep_alive(w)
    before = (x.clone(), w.clone())
    out = PROVIDER.impl("linear")(x, w, b)
    what = f"linear {dtype} x{x_shape} w[{n},{k}] x:{x_layout} w:{w_layout} bias={bias}"
    check_close(out, ref.linear(x, w, b), what)
    assert torch.equal(x, before[0]) and torch.equal(w, before[1]), f"{what}: mutated an input"
    assert torch.equal(PROVIDER.impl("linear")(x, w, b), out), f"{what}: not deterministic"


NORM_SHAPES = [(5, 67), (2, 3, 128), (1, 4096), (4, 1)]


@needs_zentorch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", NORM_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_rms_norm(
    request: pytest.FixtureRequest, dtype: torch.dtype, shape: tuple[int, ...], layout: str
) -> None:
    expect_finding(request, norm_finding(shape, layout))
    torch.manual_seed(0)
    x = strided(randn(dtype), shape, layout)
    w = torch.randn(shape[-1]).to(dtype)
    before = x.clone()
    out = PROVIDER.impl("rms_norm")(x, w, 1e-6)
    what = f"rms_norm {dtype} {shape} {layout}"
    check_close(out, ref.rms_norm(x, w, 1e-6), what)
    assert torch.equal(x, before), f"{what}: mutated x"
    assert torch.equal(PROVIDER.impl("rms_norm")(x, w, 1e-6), out), f"{what}: not deterministic"


@needs_zentorch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", NORM_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_add_rms_norm(
    request: pytest.FixtureRequest, dtype: torch.dtype, shape: tuple[int, ...], layout: str
) -> None:
    expect_finding(request, norm_finding(shape, layout))
    torch.manual_seed(0)
    x = strided(randn(dtype), shape, layout)
    residual = strided(randn(dtype), shape, layout)
    w = torch.randn(shape[-1]).to(dtype)
    x_before, res_expected = x.clone(), residual.clone()
    expected = ref.add_rms_norm(x, res_expected, w, 1e-6)
    out = PROVIDER.impl("add_rms_norm")(x, residual, w, 1e-6)
    what = f"add_rms_norm {dtype} {shape} {layout}"
    assert torch.equal(x, x_before), f"{what}: mutated x"
    check_close(residual, res_expected, f"{what} (residual)")
    check_close(out, expected, f"{what} (out)")


MOE_SHAPES = [(5, 64, 32, 4, 2), (3, 48, 24, 3, 1), (9, 128, 64, 8, 3)]


def _moe_inputs(dtype: torch.dtype, shape: tuple[int, ...], seed: int = 0) -> tuple:
    t, h, i, e, _ = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(t, h, generator=g).to(dtype)
    logits = torch.randn(t, e, generator=g)
    w13 = (torch.randn(e, 2 * i, h, generator=g) * h**-0.5).to(dtype)
    w2 = (torch.randn(e, h, i, generator=g) * i**-0.5).to(dtype)
    return x, logits, w13, w2


@needs_zentorch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", MOE_SHAPES, ids=lambda v: "T{}_H{}_I{}_E{}_k{}".format(*v))
@pytest.mark.parametrize("renormalize", [True, False], ids=["renorm", "norenorm"])
def test_fused_moe(
    request: pytest.FixtureRequest, dtype: torch.dtype, shape: tuple[int, ...], renormalize: bool
) -> None:
    # (T3 H48 I24 E3 k1, no renormalisation) happens to pass in bf16: not marked.
    if dtype == torch.bfloat16 and (renormalize or shape[-1] > 1):
        expect_finding(request, MOE_BF16)
    x, logits, w13, w2 = _moe_inputs(dtype, shape)
    keep_alive(w13, w2)
    top_k = shape[-1]
    before = [t.clone() for t in (x, logits, w13, w2)]
    out = PROVIDER.impl("fused_moe")(x, logits, w13, w2, top_k, renormalize)
    what = f"fused_moe {dtype} {shape} renormalize={renormalize}"
    check_close(out, ref.fused_moe(x, logits, w13, w2, top_k, renormalize), what)
    for a, b in zip((x, logits, w13, w2), before, strict=True):
        assert torch.equal(a, b), f"{what}: mutated an input"


@needs_zentorch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.xfail(strict=True, reason=MOE_STALE)
def test_fused_moe_provider_sees_weights_updated_in_place(dtype: torch.dtype) -> None:
    shape = MOE_SHAPES[0]
    x, logits, w13, w2 = _moe_inputs(dtype, shape)
    keep_alive(w13, w2)
    PROVIDER.impl("fused_moe")(x, logits, w13, w2, shape[-1], True)
    w13.mul_(-1)
    out = PROVIDER.impl("fused_moe")(x, logits, w13, w2, shape[-1], True)
    check_close(
        out,
        ref.fused_moe(x, logits, w13, w2, shape[-1], True),
        f"fused_moe {dtype} after w13 changed in place",
    )


@needs_zentorch
@pytest.mark.xfail(strict=True, reason=MOE_STALE)
def test_raw_zentorch_fused_moe_weight_cache_is_stale() -> None:
    shape = MOE_SHAPES[0]
    x, logits, w13, w2 = _moe_inputs(torch.float32, shape)
    keep_alive(w13, w2)
    weights, ids = ref.route(logits, shape[-1], True)
    zen = torch.ops.zentorch

    def call() -> torch.Tensor:
        out = torch.empty_like(x)
        zen.zentorch_fused_moe(
            out, x, w13, w2, None, None, weights, ids.to(torch.int32), False, "silu"
        )
        return out

    call()
    w13.mul_(-1)
    zen.zentorch_flush_moe_weight_cache()
    check_close(
        call(),
        ref.fused_moe(x, logits, w13, w2, shape[-1], True),
        "raw zentorch_fused_moe after w13 changed in place",
    )


def _dynamic_int8_reference(
    x: torch.Tensor, w: torch.Tensor, w_scales: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """Per-token symmetric int8 (round half to even, scale = amax / 127), then the int8 GEMM."""
    xf = x.float().reshape(-1, x.shape[-1])
    scales = xf.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12) / 127.0
    q = torch.clamp(torch.round(xf / scales), -128, 127).to(torch.int8)
    out = ref.int8_scaled_gemm(q, scales, w, w_scales, bias, x.dtype)
    return out.reshape(*x.shape[:-1], w.shape[0])


DQ_SHAPES = [((6, 64), 24), ((2, 3, 128), 40), ((1, 4), 1), ((5, 260), 33)]


@needs_zentorch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("x_shape", "n"), DQ_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("x_layout", ["contiguous", "strided"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_dynamic_int8_linear(
    dtype: torch.dtype, x_shape: tuple[int, ...], n: int, x_layout: str, bias: bool
) -> None:
    torch.manual_seed(0)
    k = x_shape[-1]
    x = strided(randn(dtype), x_shape, x_layout)
    w = torch.randint(-128, 128, (n, k), dtype=torch.int8)
    w_scales = torch.rand(n) / 100 + 1e-3
    b = torch.randn(n) if bias else None
    keep_alive(w)
    before = x.clone()
    out = zp.dynamic_int8_linear(x, w, w_scales, b)
    what = f"dynamic_int8_linear {dtype} x{x_shape} w[{n},{k}] {x_layout} bias={bias}"
    check_close(out, _dynamic_int8_reference(x, w, w_scales, b), what)
    assert torch.equal(x, before), f"{what}: mutated x"


@needs_zentorch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.xfail(strict=True, reason=DQ_STALE)
def test_dynamic_int8_linear_sees_weights_updated_in_place(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    x = torch.randn(1, 4).to(dtype)
    w = torch.randint(-128, 128, (1, 4), dtype=torch.int8)
    w_scales = torch.rand(1) / 100 + 1e-3
    bias = torch.randn(1)
    keep_alive(w)
    zp.dynamic_int8_linear(x, w, w_scales, bias)
    w.copy_(-w.clamp(min=-127))
    check_close(
        zp.dynamic_int8_linear(x, w, w_scales, bias),
        _dynamic_int8_reference(x, w, w_scales, bias),
        f"dynamic_int8_linear {dtype} after the weight changed in place",
    )


@needs_zentorch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.xfail(strict=True, reason=MM_STALE)
def test_linear_sees_weights_updated_in_place(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    x = torch.randn(8, 64).to(dtype)
    w = (torch.randn(32, 64) * 64**-0.5).to(dtype)
    keep_alive(w)
    PROVIDER.impl("linear")(x, w, None)
    w.mul_(-1)
    check_close(
        PROVIDER.impl("linear")(x, w, None),
        ref.linear(x, w, None),
        f"linear {dtype} after the weight changed in place",
    )


@needs_zentorch
@pytest.mark.xfail(strict=True, reason=MOE_WRITES_WEIGHTS)
def test_fused_moe_bf16_leaves_weights_alone() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 64, generator=g).to(torch.bfloat16)
    logits = torch.randn(7, 4, generator=g)
    w13 = (torch.randn(4, 96, 64, generator=g) * 64**-0.5).to(torch.bfloat16)
    w2 = (torch.randn(4, 64, 48, generator=g) * 48**-0.5).to(torch.bfloat16)
    before = (w13.clone(), w2.clone())
    keep_alive(w13, w2)
    PROVIDER.impl("fused_moe")(x, logits, w13, w2, 2, True)
    assert torch.equal(w13, before[0]) and torch.equal(w2, before[1]), "weights modified"
