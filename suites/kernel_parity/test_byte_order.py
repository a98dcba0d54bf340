"""Byte order: the bit patterns every provider writes for bf16, fp8 and int8 data.

Big-endian is where a kernel that handles a value's bytes (a bf16 taken as the high half
of an fp32 word, int8 lanes read as one int32 word, a conversion through a byte view)
breaks while its arithmetic looks right on little-endian hosts. The expected patterns
are computed here in pure Python from the formats' definitions (``struct`` with an
explicit byte order), so they are the same integers on every host:

- a tensor's logical bits (``view(torch.int16)``, ``view(torch.uint8)``) must equal them;
- its memory (``view(torch.uint8)`` of the whole tensor) must hold those bits in the
  host's own byte order, the order every other reader on the host assumes.

Inputs are chosen so that each result is exact before the final rounding (sums of two
bf16 products; fp8 codes and the midpoints between them; int8 dot products in int32),
so any host, BLAS or summation order must give the same bits: a difference is a bug
in a conversion, never a rounding difference.
"""

from __future__ import annotations

import itertools
import os
import struct
import sys
from collections.abc import Callable
from typing import Any

import pytest
from conftest import CAPABILITY_GATED
from engine_support import too_old

if too_old():
    pytest.skip(str(too_old()), allow_module_level=True)

import torch

from refengine.ops.record import counted
from refengine.ops.spec import describe
from refengine.providers import get_provider

# Every built-in provider (each skips where unavailable), plus test-only ones named in
# KERNEL_PARITY_PROVIDERS, as in test_parity.py.
PROVIDERS = tuple(dict.fromkeys([
    "native", "torch", "inductor", "triton", "zentorch",
    *(n.strip() for n in os.environ.get("KERNEL_PARITY_PROVIDERS", "").split(",") if n.strip()),
]))
# inductor compiles each (op, dtype): minutes under qemu; the smoke tier leaves it out.
SMOKE_PROVIDERS = ("native", "torch")
NATIVE = "<" if sys.byteorder == "little" else ">"


def _params(*extra: tuple[str, ...]) -> list[Any]:
    out = []
    for provider in PROVIDERS:
        marks = [pytest.mark.tier("smoke")] if provider in SMOKE_PROVIDERS else []
        for rest in extra or ((),):
            out.append(pytest.param(provider, *rest, id="-".join((*rest, provider)),
                                    marks=marks))
    return out


def _kernel(platform: Any, device: torch.device, name: str, op: str,
            args: tuple[Any, ...]) -> Callable[..., Any]:
    if name in CAPABILITY_GATED and platform.known(name):
        missing = platform.why_missing(name)
        if missing:
            pytest.skip(missing)
    provider = get_provider(name, device.type)
    ok, why = provider.is_available()
    if not ok:
        pytest.skip(f"{name} unavailable: {why}")
    info = describe(op, args)
    ok, why = provider.supports(op, info.dtype, info.shapes, info.layout)
    if not ok:
        pytest.skip(f"{name} does not support {op} here: {why}")
    return counted(name, op, provider.impl(op))


def _memory_holds(t: torch.Tensor, fmt: str, logical: list[int]) -> None:
    """The tensor's bytes are ``logical`` packed in the host's byte order."""
    raw = bytes(t.contiguous().cpu().view(torch.uint8).reshape(-1).tolist())
    want = struct.pack(f"{NATIVE}{len(logical)}{fmt}", *logical)
    assert raw == want, (
        f"memory of a {t.dtype} tensor is not its bits in {sys.byteorder}-endian order: "
        f"first bytes {raw[:8].hex()} vs {want[:8].hex()}"
    )


# -- bf16 --------------------------------------------------------------------------------

def fp32_bits(value: float) -> int:
    return int(struct.unpack(">I", struct.pack(">f", value))[0])


def bf16_bits(value: float) -> int:
    """Round-to-nearest-even of an fp32-exact finite value to bf16, as a 16-bit int."""
    u = fp32_bits(value)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def signed16(bits: int) -> int:
    return bits - 0x10000 if bits >= 0x8000 else bits


# x rows (bf16-exact) for out = x @ [[1, 1], [1, -1]].T = (x0 + x1, x0 - x1): exact fp32
# sums whose bf16 rounding is a tie to even (down and up), below and above half an ulp,
# negative, large and small exponents.
BF16_ROWS = (
    (1.0, 2.0 ** -8),               # 1 + 2^-8: tie, to even 1.0; 1 - 2^-8 exact
    (1.0 + 2.0 ** -7, 2.0 ** -8),   # 1 + 3*2^-8: tie, to even 1 + 2^-6
    (1.0, 3 * 2.0 ** -10),          # below half an ulp up; above it down
    (-2.5, -(2.0 ** -7)),           # negative tie
    (3.0, 2.0 ** -6 + 2.0 ** -8),   # 1.25 ulp: up to one ulp; 3 - 1.25 ulp likewise
    (3.0, 2.0 ** -6 + 2.0 ** -7),   # 1.5 ulp: a tie between odd and even, to even
    (1.5 * 2.0 ** 100, 2.0 ** 92),  # large exponent: tie
    (1.25 * 2.0 ** -100, 2.0 ** -108),
    (0.0, -0.0),
)


@pytest.mark.parametrize("provider_name", _params())
def test_bf16_bits(provider_name: str, platform: Any, device: torch.device,
                   record_property: Any) -> None:
    # 37 rows: past any vector width, so a SIMD conversion path runs too.
    rows = [BF16_ROWS[i % len(BF16_ROWS)] for i in range(37)]
    x = torch.tensor(rows, dtype=torch.float32).to(device=device, dtype=torch.bfloat16)
    w = torch.tensor([[1.0, 1.0], [1.0, -1.0]]).to(device=device, dtype=torch.bfloat16)
    assert x.float().cpu().tolist() == [list(r) for r in rows], "inputs are not bf16-exact"
    kernel = _kernel(platform, device, provider_name, "linear", (x, w, None))
    out = kernel(x, w, None)
    assert out.dtype == torch.bfloat16
    want = [bf16_bits(a + sign * b) for a, b in rows for sign in (1, -1)]
    got = [v & 0xFFFF for v in out.cpu().view(torch.int16).reshape(-1).tolist()]
    record_property("byteorder", sys.byteorder)
    wrong = [(i, hex(g), hex(w_)) for i, (g, w_) in enumerate(zip(got, want, strict=True))
             if g != w_]
    assert not wrong, f"bf16 bits differ (index, got, expected): {wrong[:6]}"
    _memory_holds(out, "H", want)
    # bf16 is the high half of the fp32 word, as a number, whatever the byte order.
    high = (out.float().cpu().view(torch.int32) >> 16) & 0xFFFF
    assert high.reshape(-1).tolist() == want


# -- fp8 ---------------------------------------------------------------------------------

# name -> (exponent bits, mantissa bits, bias, kind): fn = no inf, all-ones code is NaN;
# ieee = e5m2 with inf; fnuz = no inf, no -0, 0x80 is the only NaN.
FP8_FORMATS = {
    "float8_e4m3fn": (4, 3, 7, "fn"),
    "float8_e5m2": (5, 2, 15, "ieee"),
    "float8_e4m3fnuz": (4, 3, 8, "fnuz"),
    "float8_e5m2fnuz": (5, 2, 16, "fnuz"),
}


def fp8_value(code: int, fmt: str) -> float | None:
    """The value of an fp8 code, None for NaN and infinities."""
    e_bits, m_bits, bias, kind = FP8_FORMATS[fmt]
    sign = -1.0 if code & 0x80 else 1.0
    exp = (code >> m_bits) & ((1 << e_bits) - 1)
    mant = code & ((1 << m_bits) - 1)
    top = (1 << e_bits) - 1
    if kind == "fnuz" and code == 0x80:
        return None
    if kind == "fn" and exp == top and mant == (1 << m_bits) - 1:
        return None
    if kind == "ieee" and exp == top:
        return None
    if exp == 0:
        return sign * mant / (1 << m_bits) * 2.0 ** (1 - bias)
    return sign * (1 + mant / (1 << m_bits)) * 2.0 ** (exp - bias)


def fp8_cases(fmt: str) -> list[tuple[float, int]]:
    """(input, expected code): every finite positive and negative code, the midpoints
    between neighbours (ties go to the even code), and values past the max (clamped)."""
    finite = sorted((v, c) for c in range(256) if (v := fp8_value(c, fmt)) is not None
                    and not (v == 0 and c & 0x80))  # -0 is not a distinct quantised result
    cases = [(v, c) for v, c in finite]
    for (lo, c_lo), (hi, c_hi) in itertools.pairwise(finite):
        if lo < 0 <= hi:
            continue  # the tie next to zero rounds to -0 (or +0 where -0 does not exist)
        even = c_lo if c_lo % 2 == 0 else c_hi
        cases.append(((lo + hi) / 2, even))
    top, c_top = finite[-1]
    bottom, c_bottom = finite[0]
    cases += [(top * 4, c_top), (bottom * 4, c_bottom)]
    return cases


@pytest.mark.parametrize(
    "provider_name,fmt",
    _params(*[(f,) for f in FP8_FORMATS]),
)
def test_fp8_codes(provider_name: str, fmt: str, platform: Any, device: torch.device,
                   record_property: Any) -> None:
    dtype = getattr(torch, fmt, None)
    if dtype is None:
        pytest.skip(f"torch {torch.__version__} has no {fmt}")
    cases = fp8_cases(fmt)
    x = torch.tensor([v for v, _ in cases], dtype=torch.float32).to(device=device,
                                                                     dtype=torch.bfloat16)
    assert x.float().cpu().tolist() == [v for v, _ in cases], "inputs are not bf16-exact"
    scale = torch.ones(1, dtype=torch.float32, device=device)
    args = (x.reshape(1, -1), dtype, "per_tensor_static", scale, 128)
    kernel = _kernel(platform, device, provider_name, "fp8_quant", args)
    q, _ = kernel(*args)
    assert q.dtype == dtype
    got = q.cpu().view(torch.uint8).reshape(-1).tolist()
    record_property("byteorder", sys.byteorder)
    wrong = [(v, hex(g), hex(c)) for (v, c), g in zip(cases, got, strict=True) if g != c]
    assert not wrong, f"{fmt} codes differ (input, got, expected): {wrong[:6]} of {len(wrong)}"
    # One byte per value, in element order: fp8 has no byte order of its own, but a
    # kernel that writes 4 codes as one 32-bit word puts them in the host's word order.
    _memory_holds(q, "B", [c for _, c in cases])


# -- int8 --------------------------------------------------------------------------------

K8 = 36  # 9 words of 4 int8 lanes: a kernel that reads lanes in the wrong order moves
M8, N8 = 5, 3  # each a by one to three columns, which the weights below tell apart


def int8_operands() -> tuple[list[list[int]], list[list[int]]]:
    a = [[((m * 31 + k * 17 + 3) % 256) - 128 for k in range(K8)] for m in range(M8)]
    w = [[((n * 53 + k * k * 7 + 11) % 256) - 128 for k in range(K8)] for n in range(N8)]
    a[0][:4] = [-128, 127, -1, 0]  # sign extension: read as uint8 these are 128, 255
    return a, w


@pytest.mark.parametrize("provider_name", _params())
def test_int8_lanes(provider_name: str, platform: Any, device: torch.device,
                    record_property: Any) -> None:
    a_rows, w_rows = int8_operands()
    a = torch.tensor(a_rows, dtype=torch.int8, device=device)
    w = torch.tensor(w_rows, dtype=torch.int8, device=device)
    ones_a = torch.ones(M8, 1, dtype=torch.float32, device=device)
    ones_w = torch.ones(N8, dtype=torch.float32, device=device)
    args = (a, ones_a, w, ones_w, None, torch.float32)
    kernel = _kernel(platform, device, provider_name, "int8_scaled_gemm", args)
    out = kernel(*args)
    want = [[float(sum(x * y for x, y in zip(ar, wr, strict=True))) for wr in w_rows]
            for ar in a_rows]
    record_property("byteorder", sys.byteorder)
    assert out.cpu().tolist() == want, "int8 dot products differ from exact int32 sums"
    # The operands themselves: one byte per element, two's complement, in order.
    _memory_holds(a, "b", [v for row in a_rows for v in row])


@pytest.mark.tier("smoke")
def test_int8_words_follow_the_host_byte_order(device: torch.device) -> None:
    """Packing int8 lanes into 32-bit words (as packed-weight formats do) by viewing the
    bytes gives a different word on each byte order; only shifts give the same word.
    A packed weight written on one byte order must say which order it used."""
    lanes = [0x01, -0x02, 0x03, -0x80]
    t = torch.tensor(lanes, dtype=torch.int8, device=device)
    word = int(t.view(torch.int32).item()) & 0xFFFFFFFF
    by_shift_le = sum((v & 0xFF) << (8 * i) for i, v in enumerate(lanes))
    by_shift_be = sum((v & 0xFF) << (8 * (3 - i)) for i, v in enumerate(lanes))
    assert word == (by_shift_le if sys.byteorder == "little" else by_shift_be), (
        f"int8 lanes viewed as int32 give {word:#010x} on a {sys.byteorder}-endian host"
    )
