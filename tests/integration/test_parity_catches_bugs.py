"""The parity check fails on each classic kernel bug injected into a provider.

Each bug is a small, plausible mistake in an otherwise correct kernel; the check that
the kernel-parity suite runs (parity_check.check_case on the suite's own cases) must
reject it. One test also runs the suite itself in a subprocess with a buggy provider
brought in through REFENGINE_PROVIDER_MODULES / KERNEL_PARITY_PROVIDERS.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from provider_bugs import SUITE, run_suite_with, tolerance

from refengine.ops import reference
from refengine.ops.spec import fp8_max

sys.path.insert(0, str(SUITE))
from parity_cases import cases_for
from parity_check import ParityError, check_case


def wrong_eps(x: Any, weight: Any, eps: float) -> Any:
    return reference.rms_norm(x, weight, eps * 1e4)


def gate_up_swapped(x: Any) -> Any:
    d = x.shape[-1] // 2
    return (F.silu(x[..., d:].float()) * x[..., :d].float()).to(x.dtype)


def fnuz_max_for_every_flavour(x: Any, fp8_dtype: Any, mode: str, scale: Any,
                               group_size: int) -> Any:
    xf = x.float()
    fmax = 240.0  # e4m3fnuz's max used for e4m3fn too
    s = (xf.abs().amax(dim=-1, keepdim=True) / fmax).clamp(min=1e-12)
    return (xf / s).clamp(-fmax, fmax).to(fp8_dtype), s


def missing_weight_scale(a: Any, a_scales: Any, w: Any, w_scales: Any, bias: Any,
                         out_dtype: Any) -> Any:
    return reference.int8_scaled_gemm(a, a_scales, w, torch.ones_like(w_scales), bias, out_dtype)


def block_edge_off_by_one(a: Any, a_scales: Any, w: Any, w_scales: Any, out_dtype: Any) -> Any:
    k = a.shape[-1]
    # scales repeated over 127 columns instead of 128: every block edge shifts by one
    per_col = a_scales.float().repeat_interleave(127, dim=-1)
    per_col = F.pad(per_col, (0, max(0, k - per_col.shape[-1])), value=1.0)[..., :k]
    n = w.shape[0]
    w_deq = w.float() * reference.expand_block_scales(w_scales.float(), n, k, 128, 128)
    return ((a.float() * per_col) @ w_deq.t()).to(out_dtype)


def strided_read_as_contiguous(x: Any, weight: Any, eps: float) -> Any:
    # reads the underlying buffer as if the rows were packed (what a raw-pointer kernel does)
    flat = torch.as_strided(x, x.shape, (x.shape[-1], 1) if x.dim() == 2 else x.stride())
    return reference.rms_norm(flat, weight, eps)


def writes_its_input(x: Any, weight: Any, eps: float) -> Any:
    out = reference.rms_norm(x, weight, eps)
    x.mul_(1.0)
    x.add_(1.0)
    return out


BUGS: dict[str, tuple[str, str, Callable[..., Any], torch.dtype, torch.dtype | None]] = {
    "wrong-epsilon": ("rms_norm", "2d-odd", wrong_eps, torch.float32, None),
    "gate-up-swapped": ("silu_and_mul", "2d-odd", gate_up_swapped, torch.bfloat16, None),
    "fp8-max-of-wrong-flavour": ("fp8_quant", "per-token-dynamic", fnuz_max_for_every_flavour,
                                 torch.bfloat16, torch.float8_e4m3fn),
    "missing-scale": ("int8_scaled_gemm", "per-token-bias", missing_weight_scale,
                      torch.bfloat16, None),
    "block-edge-off-by-one": ("fp8_block_gemm", "k200-n130-bf16", block_edge_off_by_one,
                              torch.bfloat16, torch.float8_e4m3fn),
    # the case inductor also runs: its K=200 case is a known failure of its own
    "block-edge-off-by-one-whole-groups": ("fp8_block_gemm", "3d-k256-fp32",
                                           block_edge_off_by_one, torch.float32,
                                           torch.float8_e5m2),
    "strided-read-as-contiguous": ("rms_norm", "x-strided", strided_read_as_contiguous,
                                   torch.float32, None),
    "undeclared-mutation": ("rms_norm", "2d-odd", writes_its_input, torch.float32, None),
}


@pytest.mark.parametrize("bug", BUGS)
def test_parity_check_rejects_the_bug(bug: str) -> None:
    op, case_id, impl, dtype, fp8 = BUGS[bug]
    case = next(c for c in cases_for(op) if c.id == case_id)

    def build() -> tuple[Any, ...]:
        return case.args(dtype, fp8, "cpu", 0)

    with pytest.raises(ParityError):
        check_case(op, build, impl, tolerance, case_id, case.layout)
    # the same check passes the correct kernel: the failure is the bug's, not the case's
    check_case(op, build, getattr(reference, op), tolerance, case_id, case.layout)


def test_fp8_bug_is_nan_on_fnuz() -> None:
    x = torch.tensor([[300.0, 1.0]])
    unclamped = (x / 1.0).to(torch.float8_e4m3fnuz)
    assert unclamped.float().isnan().any(), "e4m3fnuz has no infinity: a cast of >= 248 is NaN"
    assert fp8_max(torch.float8_e4m3fnuz) == 240.0


BUGGY_PROVIDER = textwrap.dedent('''
    import torch.nn.functional as F
    from refengine.providers import TableProvider

    def silu_and_mul(x):
        d = x.shape[-1] // 2
        return F.silu(x[..., d:]) * x[..., :d]  # gate and up swapped

    class Buggy(TableProvider):
        name = "buggy"

    def make_provider(device):
        return Buggy(device, {"silu_and_mul": silu_and_mul})
''')


def test_suite_itself_fails_on_a_buggy_provider(tmp_path: Path) -> None:
    proc = run_suite_with(tmp_path, "buggy", BUGGY_PROVIDER, "test_parity.py",
                          "-k", "silu_and_mul and buggy")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "failed" in out and "passed" not in out.split("\n")[-2], out
    assert "silu_and_mul-2d-odd-bfloat16-buggy" in out
