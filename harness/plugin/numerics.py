"""Compare a result with its reference under a tolerance, and record how close it came.

Imported only inside suites (it imports torch). The allowed error is torch.allclose's
``atol + rtol * |expected|``; ``headroom`` is the largest error over that allowance,
so 1.0 is exactly at the limit and 0.5 leaves half the tolerance unused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Comparison:
    max_abs_err: float
    max_rel_err: float
    headroom: float
    ok: bool
    detail: str


def compare(actual: torch.Tensor, expected: torch.Tensor, tol: Any) -> Comparison:
    if actual.shape != expected.shape:
        return Comparison(
            float("inf"),
            float("inf"),
            float("inf"),
            False,
            f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}",
        )
    if getattr(tol, "bitwise", False):
        same = actual.dtype == expected.dtype and torch.equal(
            actual.contiguous().view(torch.uint8), expected.contiguous().view(torch.uint8)
        )
        a, e = actual.float(), expected.float()
        diff = (a - e).abs().nan_to_num(nan=float("inf"))
        max_abs = float(diff.max()) if diff.numel() else 0.0
        return Comparison(
            max_abs,
            max_abs,
            0.0 if same else float("inf"),
            same,
            "bitwise equal" if same else f"not bitwise equal (max abs {max_abs:.3g})",
        )
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    if a.numel() == 0:
        return Comparison(0.0, 0.0, 0.0, True, "empty")
    nan_mismatch = bool((a.isnan() != e.isnan()).any())
    a = a.nan_to_num(nan=0.0)
    e = e.nan_to_num(nan=0.0)
    diff = (a - e).abs()
    allowed = tol.atol + tol.rtol * e.abs()
    max_abs = float(diff.max())
    max_rel = float((diff / e.abs().clamp_min(1e-12)).max())
    ratio = diff / allowed.clamp_min(1e-300)
    headroom = float(ratio.max())
    worst = int(ratio.argmax())
    ok = headroom <= 1.0 and not nan_mismatch
    detail = (
        f"max abs err {max_abs:.4g}, max rel err {max_rel:.4g}, headroom {headroom:.3g} "
        f"(atol {tol.atol:g}, rtol {tol.rtol:g}); worst at flat index {worst}: "
        f"got {float(a.flatten()[worst]):.6g}, expected {float(e.flatten()[worst]):.6g}"
    )
    if nan_mismatch:
        detail = "NaN pattern differs from the reference; " + detail
    return Comparison(max_abs, max_rel, headroom, ok, detail)


def record_numerics(
    actual: torch.Tensor,
    expected: torch.Tensor,
    tol: Any,
    record_property: Callable[[str, object], None],
    **props: object,
) -> Comparison:
    """Compare, record the JUnit properties of docs/contracts.md, and assert."""
    result = compare(actual, expected, tol)
    for key, value in props.items():
        record_property(key, value)
    record_property("max_abs_err", f"{result.max_abs_err:.6g}")
    record_property("max_rel_err", f"{result.max_rel_err:.6g}")
    record_property("atol", "bitwise" if getattr(tol, "bitwise", False) else f"{tol.atol:g}")
    record_property("rtol", "bitwise" if getattr(tol, "bitwise", False) else f"{tol.rtol:g}")
    record_property("headroom", f"{result.headroom:.4g}")
    source = getattr(tol, "source", "")
    if source:
        record_property("tolerance_source", source)
    if not result.ok:
        label = " ".join(f"{k}={v}" for k, v in props.items())
        raise AssertionError(f"{label}: out of tolerance: {result.detail}")
    return result
