"""Compile one block with the fusion passes and check that it still computes what eager does.

Three checks, all collected before anything is raised (one bug often shows in several):
- every fused node's arguments are those of the pattern it replaced (refengine.fusion.audit:
  epsilon, quantisation mode / scale / group size, residual, group name);
- every output within the platform's tolerance of eager on the same inputs and weights;
- bitwise equal to eager where the fused path must agree with the unfused one: each fused
  op whose kernel is ``native`` runs its component ops through the installed registry in
  the unfused order, rounding as the unfused graph does (refengine/fusion/fused_ops.py),
  and the backend compiles with ``emulate_precision_casts`` (inductor rounds as eager);
- for a tensor-parallel block, each rank's shard (eager, float32: refengine/fusion/tp.py
  says why) against the unsharded block on the same weights (``against_unsharded``):
  sharded eager and sharded fused agree with each other when the shards are wrong (one
  rank given only gate rows of a merged gate/up weight), the whole block does not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.plugin.numerics import compare
from refengine.fusion import FusionBackend, fused_ops, passes
from refengine.fusion.backend import FusionReport

OUTPUT_NAMES = ("out", "residual")


class FusionMismatch(AssertionError):
    """The fused graph's arguments or numerics differ from the unfused computation."""


@dataclass
class FusionResult:
    eager: tuple[torch.Tensor, ...]
    fused: tuple[torch.Tensor, ...]
    report: FusionReport
    pass_defs: tuple[passes.PassDef, ...]
    compile_error: str = ""  # the compile (or the compiled call) raised: no fused outputs
    problems: list[str] = field(default_factory=list)


def _tuple(value: Any) -> tuple[torch.Tensor, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def run_block(block: torch.nn.Module, args: Sequence[torch.Tensor],
              fp8_dtype: torch.dtype | None,
              pass_defs: Sequence[passes.PassDef] | None = None) -> FusionResult:
    """Eager, then compiled with the passes, on separate copies of the same inputs."""
    torch._dynamo.reset()
    backend = FusionBackend(fp8_dtype=fp8_dtype, pass_defs=pass_defs)
    with torch.no_grad():
        eager = block(*[a.clone() for a in args])
        try:
            fused = torch.compile(block, backend=backend, fullgraph=True)(
                *[a.clone() for a in args])
        except Exception as error:  # reported with the audit, which explains it
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            fused, compile_error = (), f"{type(error).__name__}: {first}"
        else:
            compile_error = ""
    defs = tuple(d for d, _ in backend.matchers)
    return FusionResult(_tuple(eager), _tuple(fused), backend.report, defs, compile_error)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def bitwise_required(result: FusionResult) -> bool:
    """Whether every pass that fused something did it with a native (composed) kernel."""
    for defn in result.pass_defs:
        matched = result.report.passes.get(defn.name)
        if matched is None or not matched.applicable or not matched.matched:
            continue
        provider, _ = fused_ops.fused_provider(defn.fused_op)
        if provider != "native":
            return False
    return True


def check(case: str, result: FusionResult, tol: Any,
          record: Callable[..., Any] | None = None) -> list[str]:
    """Every problem of the fused graph against eager; ``record(name, comparison, tol)``
    is called per output (the suite writes JUnit properties with it)."""
    result.problems = check_outputs(case, result.eager, result.fused,
                                    result.report.arg_mismatches, bitwise_required(result),
                                    tol, record)
    if result.compile_error:
        result.problems.append(f"{case}: the fused graph failed: {result.compile_error}")
    return result.problems


def check_outputs(case: str, eager: Sequence[torch.Tensor], fused: Sequence[torch.Tensor],
                  arg_mismatches: Sequence[str], bitwise: bool, tol: Any,
                  record: Callable[..., Any] | None = None) -> list[str]:
    problems = [f"{case}: {p}" for p in arg_mismatches]
    for name, got, want in zip(OUTPUT_NAMES, fused, eager, strict=False):
        cmp = compare(got, want, tol)
        if record is not None:
            record(name, cmp, tol)
        if not cmp.ok:
            problems.append(f"{case}.{name}: fused vs eager out of tolerance: {cmp.detail}")
        elif bitwise and not _same_bits(got, want):
            diff = float((got.float() - want.float()).abs().max())
            problems.append(
                f"{case}.{name}: fused differs from eager (max abs {diff:.3g}) where every "
                "fused kernel composes the unfused ops and must agree bit for bit"
            )
    return problems


def against_unsharded(case: str, block: str, ranks: Sequence[dict[str, Any]], tol: Any,
                      record: Callable[..., Any] | None = None) -> list[str]:
    """Each rank's float32 shard output (the whole block's, after the all-reduce) against
    the unsharded block (``unsharded`` of the sharded block ``module:attribute``), eager
    in float32 with the installed registry, under ``tol`` (the sums run in another order)."""
    from refengine.fusion.tp import load_block
    from refengine.model.blocks import inputs

    full = load_block(block).unsharded(torch.float32)
    with torch.no_grad():
        want = full(inputs(torch.float32)[0])
    problems = []
    for rank, result in enumerate(ranks):
        problems += check_outputs(f"{case}.rank{rank}.vs_unsharded", (want,),
                                  (result["eager_fp32"],), [], False, tol,
                                  record if rank == 0 else None)
    return problems


def raise_problems(problems: Sequence[str]) -> None:
    if problems:
        raise FusionMismatch("\n".join(problems))
