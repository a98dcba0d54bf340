"""Each dtype the matrix declares really works on the device, and the fp8 flavour is right."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.tier("smoke")

# finfo max per fp8 format (OCP e4m3fn 448; AMD's fnuz variants 240 / 57344).
FP8_MAX = {
    "float8_e4m3fn": 448.0,
    "float8_e4m3fnuz": 240.0,
    "float8_e5m2": 57344.0,
    "float8_e5m2fnuz": 57344.0,
}


def _dtype(name: str):
    dtype = getattr(torch, name, None)
    if dtype is None:
        pytest.fail(f"torch {torch.__version__} has no dtype {name}")
    return dtype


@pytest.fixture
def dtype(platform_dtype):
    return _dtype(platform_dtype)


def test_dtype_create_matmul_roundtrip(dtype, device):
    # Small integers are exact in every float format the matrices use.
    base = torch.arange(-8, 8, dtype=torch.float32).reshape(4, 4)
    x = base.to(device=device, dtype=dtype)
    assert x.dtype == dtype and x.device.type == device.type
    back = x.to(torch.float32).cpu()
    assert torch.equal(back, base), f"{dtype} cast round trip changed values"
    # eye is built in fp32 and cast: old torch (Debian's 1.13 on s390x) has no bf16 eye,
    # and the claim under test is the matmul, not the constructor.
    eye = torch.eye(4).to(device=device, dtype=dtype)
    product = (x @ eye).to(torch.float32).cpu()
    assert torch.equal(product, base), f"{dtype} matmul with identity changed values"


@pytest.mark.requires("fp8")
def test_fp8_flavour_and_max(platform, fp8_dtype, device):
    name = platform.matrix.fp8.e4m3
    assert str(fp8_dtype) == f"torch.{name}"
    assert float(torch.finfo(fp8_dtype).max) == FP8_MAX[name]
    big = torch.tensor([1e6, -1e6, 1.0], device=device)
    # Quantizers clamp before the cast: only then is the result defined for every flavour.
    limit = torch.finfo(fp8_dtype).max
    q = big.clamp(-limit, limit).to(fp8_dtype).to(torch.float32).cpu()
    assert q.tolist() == [FP8_MAX[name], -FP8_MAX[name], 1.0]


@pytest.mark.requires("fp8")
def test_fp8_e5m2_flavour(platform, device):
    name = platform.matrix.fp8.e5m2
    if not name:
        pytest.skip(f"{platform.name} declares no e5m2 format")
    dtype = _dtype(name)
    assert float(torch.finfo(dtype).max) == FP8_MAX[name]
    x = torch.tensor([0.5, -2.0], device=device).to(dtype).to(torch.float32).cpu()
    assert x.tolist() == [0.5, -2.0]


def test_byteorder_matches(platform):
    import sys

    assert sys.byteorder == platform.matrix.byteorder, (
        f"{platform.name} declares {platform.matrix.byteorder}-endian, "
        f"this interpreter is {sys.byteorder}-endian"
    )


def test_bf16_conversion_is_byte_order_safe(device):
    # A big-endian bf16 conversion bug existed in the field: check the bits, not just values.
    values = torch.tensor([1.0, -2.5, 3.140625], dtype=torch.float32, device=device)
    as_bf16 = values.to(torch.bfloat16).cpu()
    bits = as_bf16.view(torch.int16).tolist()
    assert bits == [0x3F80, -16352, 0x4049], f"bf16 bit patterns wrong: {bits}"
