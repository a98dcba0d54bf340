"""Rounding helpers that give the same, correctly rounded bits on every Triton backend.

Triton 3.6.0's interpreter converts fp32 with its own code: to bf16 it truncates (round
toward zero: about half of random values land one ulp low), and to fp8 it rounds ties away
from zero, flushes fp8 subnormals and loses the mantissa carry when the exponent is odd
(31.9 -> 16.0 in e4m3fn). The compiled GPU paths round to nearest even. Rounding in fp32
arithmetic first leaves the final cast only exactly representable values, so the
interpreter and the compilers store the same bits.
"""

import triton
import triton.language as tl


@triton.jit
def round_to_bf16(v):
    """fp32 -> the nearest bf16 value (ties to even), still held in fp32."""
    bits = v.to(tl.int32, bitcast=True)
    bias = 0x7FFF + ((bits >> 16) & 1)
    rounded = ((bits + bias) & -65536).to(tl.float32, bitcast=True)
    # NaN payloads must not carry into the exponent or sign.
    return tl.where(v != v, v, rounded)


@triton.jit
def store_rounded(ptr, offsets, v, mask):
    """Store fp32 ``v`` into ``ptr``'s element type, rounding to nearest even."""
    if ptr.dtype.element_ty == tl.bfloat16:
        v = round_to_bf16(v)
    tl.store(ptr + offsets, v.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def round_to_fp8_grid(v, MANT_BITS: tl.constexpr, MIN_EXP: tl.constexpr):
    """fp32 (already clamped to the format's range) -> nearest fp8 value, in fp32."""
    bits = v.to(tl.int32, bitcast=True)
    e = tl.maximum(((bits >> 23) & 0xFF) - 127, MIN_EXP)
    # ulp of fp8 in this binade (fixed below the smallest normal); a power of two, so
    # scaling by it and back is exact.
    inv_ulp = ((127 - e + MANT_BITS) << 23).to(tl.float32, bitcast=True)
    ulp = ((127 + e - MANT_BITS) << 23).to(tl.float32, bitcast=True)
    t = v * inv_ulp
    # Adding and subtracting 1.5 * 2**23 rounds |t| < 2**22 to an integer, ties to even.
    r = (t + 12582912.0) - 12582912.0
    # The trick returns +0.0 for small negatives; keep the sign as the cast would.
    return tl.where(r == 0.0, v * 0.0, r * ulp)
