"""The byte-order checks fail on kernels written for the other byte order.

suites/kernel_parity/test_byte_order.py runs in the s390x lane (big-endian, under qemu)
and everywhere else. Here, on whatever host runs the tests, a provider whose kernels
assume the byte order this host does NOT have (a bf16 taken from the wrong half of the
fp32 word, fp8 codes stored through 32-bit words in the wrong lane order, int8 lanes
unpacked from 32-bit words in the wrong order) must fail each check, while the same
arithmetic done with shifts, not byte views, passes: the failure on an x86 host is the
one a little-endian-only kernel shows on s390x.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from provider_bugs import run_suite_with

WRONG_ORDER_PROVIDER = textwrap.dedent('''
    import sys
    import torch
    from refengine.ops import reference
    from refengine.providers import TableProvider

    # The half-word / lane index the OTHER byte order would need.
    OTHER_HIGH = 0 if sys.byteorder == "little" else 1

    def linear(x, weight, bias):
        acc = reference.linear(x.float(), weight.float(), None if bias is None else bias.float())
        acc = acc.contiguous()
        # "bf16 is the high half of the fp32 word", taken from a byte view of the
        # word: right on one byte order only (and it truncates instead of rounding)
        halves = acc.view(torch.int16).reshape(*acc.shape, 2)
        return halves[..., OTHER_HIGH].contiguous().view(torch.bfloat16)

    def fp8_quant(x, fp8_dtype, mode, scale, group_size):
        q, s = reference.fp8_quant(x, fp8_dtype, mode, scale, group_size)
        # codes packed four to a 32-bit word with shifts, stored through a byte view
        c = q.view(torch.uint8).reshape(-1).to(torch.int64)
        pad = (-c.numel()) % 4
        c = torch.cat([c, c.new_zeros(pad)]).reshape(-1, 4)
        shifts = torch.tensor([0, 8, 16, 24]) if OTHER_HIGH == 1 else torch.tensor([24, 16, 8, 0])
        words = (c << shifts).sum(-1).to(torch.int64)
        words = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
        out = words.view(torch.uint8).reshape(-1)[:q.numel()]
        return out.view(fp8_dtype).reshape(q.shape), s

    def int8_scaled_gemm(a, a_scales, w, w_scales, bias, out_dtype):
        # the weight packed four lanes to a 32-bit word with shifts (as packed-weight
        # formats are), then read back through a byte view: lanes reversed per word
        c = (w.to(torch.int64) & 0xFF).reshape(*w.shape[:-1], -1, 4)
        shifts = torch.tensor([0, 8, 16, 24]) if OTHER_HIGH == 1 else torch.tensor([24, 16, 8, 0])
        words = (c << shifts).sum(-1)
        words = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
        unpacked = words.contiguous().view(torch.int8).reshape(w.shape)
        return reference.int8_scaled_gemm(a, a_scales, unpacked, w_scales, bias, out_dtype)

    class WrongOrder(TableProvider):
        name = "wrongorder"

    def make_provider(device):
        return WrongOrder(device, {"linear": linear, "fp8_quant": fp8_quant,
                                   "int8_scaled_gemm": int8_scaled_gemm})
''')


def test_byte_order_checks_fail_on_the_other_byte_order(tmp_path: Path) -> None:
    proc = run_suite_with(tmp_path, "wrongorder", WRONG_ORDER_PROVIDER, "test_byte_order.py",
                          "-k", "wrongorder or native", "-rA")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    failed = {line.split(" ")[1].split("::")[-1] for line in out.splitlines()
              if line.startswith("FAILED ")}
    assert failed == {
        "test_bf16_bits[wrongorder]",
        "test_int8_lanes[wrongorder]",
        # fp8 codes: every flavour this torch has goes through the same word packing
        *(f"test_fp8_codes[{f}-wrongorder]" for f in ("float8_e4m3fn", "float8_e5m2",
                                                     "float8_e4m3fnuz", "float8_e5m2fnuz")),
    }, out
    # the reference kernels pass the same checks on this host
    passed = {line.split(" ")[1].split("::")[-1] for line in out.splitlines()
              if line.startswith("PASSED ")}
    assert "test_bf16_bits[native]" in passed and "test_int8_lanes[native]" in passed, out
