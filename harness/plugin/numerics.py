"""Compare a result with its reference under a tolerance, and record how close it came.

Imported only inside suites (it imports torch). The allowed error is torch.allclose's
``atol + rtol * |expected|``; ``headroom`` is the largest error over that allowance,
so 1.0 is exactly at the limit and 0.5 leaves half the tolerance unused.

NaN and Inf are findings, not values to compare: unless the caller says the op's contract
allows them (``nonfinite_ok``), a NaN or Inf in the result fails whether or not the
reference has the same one (a bug shared by the reference path and the kernel, an fp8
limit that overflows in both, would otherwise pass every check), and one in the
reference fails as a broken case (the inputs must not make it). Where they are allowed,
they must sit where the reference has them, of the same kind, and the rest is compared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True)
class Comparison:
    max_abs_err: float
    max_rel_err: float
    headroom: float
    ok: bool
    detail: str


def nonfinite(t: torch.Tensor) -> str:
    """``"3 NaN, 1 Inf"`` (the non-zero counts) for ``t``; "" when every value is finite."""
    if not t.is_floating_point():
        return ""
    t = t.detach().float() if t.element_size() == 1 else t.detach()  # fp8: no isnan
    counts = ((int(t.isnan().sum()), "NaN"), (int(t.isinf().sum()), "Inf"))
    return ", ".join(f"{n} {kind}" for n, kind in counts if n)


def nonfinite_problem(actual: torch.Tensor, expected: torch.Tensor) -> str:
    """Why these two cannot be compared where the contract allows no NaN or Inf ("": none)."""
    found, ref = nonfinite(actual), nonfinite(expected)
    if ref:
        return (f"the reference has {ref} (a broken case: its inputs must not make them, "
                "or the op's contract must allow them)")
    if found:
        return f"{found} in the result, where the op's contract allows none"
    return ""


def _failed(detail: str, max_abs: float = float("inf"),
            max_rel: float = float("inf")) -> Comparison:
    return Comparison(max_abs, max_rel, float("inf"), False, detail)


def _bitwise(actual: torch.Tensor, expected: torch.Tensor, problem: str) -> Comparison:
    same = actual.dtype == expected.dtype and torch.equal(
        actual.contiguous().view(torch.uint8), expected.contiguous().view(torch.uint8)
    )
    diff = (actual.float() - expected.float()).abs().nan_to_num(nan=float("inf"))
    max_abs = float(diff.max()) if diff.numel() else 0.0
    if problem:
        return _failed(f"{problem}; " + ("bitwise equal" if same else "not bitwise equal"),
                       max_abs, max_abs)
    return Comparison(
        max_abs,
        max_abs,
        0.0 if same else float("inf"),
        same,
        "bitwise equal" if same else f"not bitwise equal (max abs {max_abs:.3g})",
    )


class Tolerances(Protocol):
    """What a comparison reads of a tolerance (the session's ``Tolerance``, a matrix's, a
    suite's own); ``bitwise`` where it has one."""

    @property
    def atol(self) -> float: ...

    @property
    def rtol(self) -> float: ...


def _same_nonfinite(a: torch.Tensor, e: torch.Tensor) -> bool:
    return all(torch.equal(f(a), f(e)) for f in (torch.isnan, torch.isposinf, torch.isneginf))


def compare(actual: torch.Tensor, expected: torch.Tensor, tol: Tolerances, *,
            nonfinite_ok: bool = False) -> Comparison:
    """``actual`` against ``expected`` under ``tol``; ``nonfinite_ok``: the op's contract
    allows NaN and Inf (they must then match the reference's, position and kind)."""
    if actual.shape != expected.shape:
        return _failed(f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    problem = "" if nonfinite_ok else nonfinite_problem(actual, expected)
    if getattr(tol, "bitwise", False):
        return _bitwise(actual, expected, problem)
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    if a.numel() == 0:
        return Comparison(0.0, 0.0, 0.0, True, "empty")
    pattern_differs = nonfinite_ok and not _same_nonfinite(a, e)
    # What is left to compare: the finite values (the non-finite ones judged above).
    both = a.isfinite() & e.isfinite()
    a, e = a.where(both, 0.0), e.where(both, 0.0)
    diff = (a - e).abs()
    allowed = tol.atol + tol.rtol * e.abs()
    max_abs = float(diff.max())
    max_rel = float((diff / e.abs().clamp_min(1e-12)).max())
    ratio = diff / allowed.clamp_min(1e-300)
    headroom = float(ratio.max())
    worst = int(ratio.argmax())
    detail = (
        f"max abs err {max_abs:.4g}, max rel err {max_rel:.4g}, headroom {headroom:.3g} "
        f"(atol {tol.atol:g}, rtol {tol.rtol:g}); worst at flat index {worst}: "
        f"got {float(a.flatten()[worst]):.6g}, expected {float(e.flatten()[worst]):.6g}"
    )
    if problem:
        return _failed(f"{problem}; elsewhere {detail}", max_abs, max_rel)
    if pattern_differs:
        return _failed(f"NaN / Inf pattern differs from the reference; {detail}", max_abs,
                       max_rel)
    return Comparison(max_abs, max_rel, headroom, headroom <= 1.0, detail)


def record_numerics(
    actual: torch.Tensor,
    expected: torch.Tensor,
    tol: Tolerances,
    record_property: Callable[[str, object], None],
    *,
    nonfinite_ok: bool = False,
    **props: object,
) -> Comparison:
    """Compare, record the JUnit properties of docs/contracts.md, and assert
    (``nonfinite_ok``: the op's contract allows NaN and Inf; see ``compare``)."""
    result = compare(actual, expected, tol, nonfinite_ok=nonfinite_ok)
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
