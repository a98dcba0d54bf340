"""Check one provider's kernel against ``native`` on one case: contract first, then numerics.

The contract part works like torch.library.opcheck: inputs the op does not declare as
mutated are bit-identical after the call; outputs have the reference's structure,
dtype, shape and device and alias no input; a second call on fresh inputs gives the
same bits. The numerics part compares every output (and every declared-mutated input)
with the reference under the platform's tolerance for that dtype and op. A NaN or Inf
fails it wherever the op's contract allows none (``OpSpec.nonfinite``), the reference's
own included: a reference that makes one is a broken case (BrokenCase), not a value a
kernel may match.

fp8_block_gemm is judged by relative mean absolute error (mean |err| / mean |ref|),
as engines judge block-scaled GEMMs; the bound is REL_MEAN_BOUND unless the matrix
sets an op-level tolerance for it, whose ``rtol`` is then the bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.plugin.numerics import compare, nonfinite
from refengine.ops import reference
from refengine.ops.spec import OPS, describe

REL_MEAN_OPS = ("fp8_block_gemm",)
REL_MEAN_BOUND = 1e-3

ToleranceFn = Callable[[torch.dtype, str], Any]


class ParityError(AssertionError):
    """The provider broke the op's contract or its numerics; the message says where."""

    def __init__(self, message: str, outcome: Outcome | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome


class BrokenCase(AssertionError):
    """The reference itself made a NaN or Inf on the case's inputs, where the op's contract
    allows none: the case generator must not build it (or the contract must allow it)."""


@dataclass
class Outcome:
    op: str
    case: str
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    headroom: float = 0.0
    atol: str = ""
    rtol: str = ""
    details: list[str] = field(default_factory=list)

    def properties(self) -> dict[str, str]:
        return {"max_abs_err": f"{self.max_abs_err:.6g}", "max_rel_err": f"{self.max_rel_err:.6g}",
                "atol": self.atol, "rtol": self.rtol, "headroom": f"{self.headroom:.4g}"}


def _as_tuple(value: Any) -> tuple[torch.Tensor, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == torch.bool:
        return torch.equal(a, b)
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def _storages(args: Sequence[Any]) -> set[int]:
    return {a.untyped_storage().data_ptr() for a in args
            if isinstance(a, torch.Tensor) and a.numel()}


def check_contract(op: str, build: Callable[[], tuple[Any, ...]], impl: Callable[..., Any],
                   expected: tuple[torch.Tensor, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Run ``impl`` twice on fresh inputs; returns (outputs, the mutated arguments)."""
    spec = OPS[op]
    args, pristine = build(), build()
    outputs = _as_tuple(impl(*args))
    problems: list[str] = []
    if len(outputs) != len(expected):
        raise ParityError(f"{op}: returned {len(outputs)} outputs, the contract says "
                          f"{len(expected)}")
    inputs = _storages(args)
    for i, (out, ref) in enumerate(zip(outputs, expected, strict=True)):
        if not isinstance(out, torch.Tensor):
            problems.append(f"output {i} is {type(out).__name__}, not a tensor")
            continue
        for what, got, want in (("dtype", out.dtype, ref.dtype), ("shape", out.shape, ref.shape),
                                ("device", out.device.type, ref.device.type)):
            if got != want:
                problems.append(f"output {i} {what} {got}, the contract says {want}")
        if out.numel() and out.untyped_storage().data_ptr() in inputs:
            problems.append(f"output {i} aliases an input (custom ops may not return views)")
    for name, arg, before in zip(spec.params, args, pristine, strict=True):
        if isinstance(arg, torch.Tensor) and name not in spec.mutates and (
                arg.stride() != before.stride() or not _bits_equal(arg, before)):
            problems.append(f"input {name!r} was modified but is not declared mutated")
    if problems:
        raise ParityError(f"{op}: " + "; ".join(problems))
    mutated = tuple(a for n, a in zip(spec.params, args, strict=True) if n in spec.mutates)
    again = build()
    repeat = _as_tuple(impl(*again))
    for i, (first, second) in enumerate(zip(outputs, repeat, strict=True)):
        if not _bits_equal(first, second):
            raise ParityError(f"{op}: output {i} differs between two calls on the same inputs")
    return outputs, mutated


def _rel_mean(actual: torch.Tensor, expected: torch.Tensor, bound: float) -> tuple[float, str]:
    a, e = actual.double(), expected.double()
    err = float((a - e).abs().mean() / e.abs().mean().clamp_min(1e-30))
    found = nonfinite(actual)  # the reference's were refused before (check_reference)
    if found:
        return float("inf"), f"{found} in the result, where the op's contract allows none"
    return err, f"relative mean abs err {err:.4g} (bound {bound:g})"


def check_reference(op: str, case: str, expected: Sequence[torch.Tensor],
                    mutated: Sequence[torch.Tensor]) -> None:
    """Raise BrokenCase where the reference made a NaN or Inf the op's contract forbids."""
    if OPS[op].nonfinite:
        return
    labels = [f"output {i}" for i in range(len(expected))]
    labels += [f"mutated input {name!r}" for name in OPS[op].mutates]
    bad = [f"{label}: {found}" for label, t in zip(labels, (*expected, *mutated), strict=True)
           if isinstance(t, torch.Tensor) and (found := nonfinite(t))]
    if bad:
        raise BrokenCase(f"{op}/{case}: the reference (native) made non-finite values "
                         f"({'; '.join(bad)}), which the contract of {op} allows nowhere: "
                         "the case must not be generated, or the contract must allow them")


def check_case(op: str, build: Callable[[], tuple[Any, ...]], impl: Callable[..., Any],
               tolerance: ToleranceFn, case: str = "", layout: str | None = None) -> Outcome:
    """The whole check of one provider kernel on one case; raises ParityError on failure."""
    ref_args = build()
    if layout is not None and describe(op, ref_args).layout != layout:
        raise ValueError(f"{op}/{case}: case promises layout {layout!r} but builds "
                         f"{describe(op, ref_args).layout!r}")
    expected = _as_tuple(getattr(reference, op)(*ref_args))
    ref_mutated = tuple(a for n, a in zip(OPS[op].params, ref_args, strict=True)
                        if n in OPS[op].mutates)
    check_reference(op, case, expected, ref_mutated)
    outputs, mutated = check_contract(op, build, impl, expected)
    outcome = Outcome(op=op, case=case)
    failures: list[str] = []
    pairs = [(f"output {i}", a, e) for i, (a, e) in enumerate(zip(outputs, expected,
                                                                   strict=True))]
    pairs += [(f"mutated input {OPS[op].mutates[i]!r}", a, e)
              for i, (a, e) in enumerate(zip(mutated, ref_mutated, strict=True))]
    atols, rtols = [], []
    for label, actual, want in pairs:
        tol = tolerance(want.dtype, op)
        if op in REL_MEAN_OPS and label == "output 0":
            bound = tol.rtol if "op:" in str(getattr(tol, "source", "")) else REL_MEAN_BOUND
            err, detail = _rel_mean(actual, want, bound)
            headroom, abs_err, rel_err, ok = err / bound, err, err, err <= bound
            atols.append("rel_mean")
            rtols.append(f"{bound:g}")
        else:
            cmp = compare(actual, want, tol, nonfinite_ok=OPS[op].nonfinite)
            headroom, abs_err, rel_err, ok = cmp.headroom, cmp.max_abs_err, cmp.max_rel_err, cmp.ok
            detail = cmp.detail
            bitwise = getattr(tol, "bitwise", False)
            atols.append("bitwise" if bitwise else f"{tol.atol:g}")
            rtols.append("bitwise" if bitwise else f"{tol.rtol:g}")
        outcome.details.append(f"{label}: {detail}")
        if headroom >= outcome.headroom:
            outcome.headroom = headroom
            outcome.max_abs_err, outcome.max_rel_err = abs_err, rel_err
        if not ok:
            failures.append(f"{label} ({actual.dtype}): {detail}")
    outcome.atol, outcome.rtol = ",".join(atols), ",".join(rtols)
    if failures:
        raise ParityError(f"{op}/{case}: out of tolerance against native: " + "; ".join(failures),
                          outcome)
    return outcome
