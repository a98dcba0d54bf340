"""The contract of every fused op the fusion passes introduce, checked as the parity suite
checks a kernel (suites/kernel_parity/parity_check.py), with the platform's kernels.

A fused op is a ``refengine::`` custom op: the graph trusts its schema. So for each one,
on fresh seeded inputs, through the op itself (whichever provider the platform's registry
picks for it):
- it writes only the arguments its case declares written (``fused_writes``, as data, which
  must be what its schema declares: none so far, every refengine fused op is functional),
  and those hold the values the case says; every other input is bit-identical, strides
  included, after the call. The same for the eager reference the outputs are checked
  against (``reference_writes``: refengine.ops.reference.add_rms_norm, like vLLM's
  fused_add_rms_norm, writes its residual in place by design), so a failure names the
  side that wrote;
- a collective op's case runs on ``world`` gloo ranks (two) with inputs seeded per rank,
  so that a reduction written into an input changes it (on one rank it is the identity);
- it returns what the unfused computation returns (refengine.ops.reference composed):
  as many outputs, each of that dtype, shape and device;
- its fake (the shapes the compiler plans with) says the same;
- a second call on the same inputs gives the same bits.

The numerics are the fusion tests' (fused graph against eager); a wrong dtype or an input
written in place can pass those (the eager and fused outputs agree), which is why this
check exists. tests/integration/test_fusion_contract_catches_bugs.py runs it on bugs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from refengine.fusion import fused_ops  # noqa: F401  (registers the refengine::* fused ops)
from refengine.ops import reference
from refengine.ops.collective import world_group_name
from refengine.ops.spec import FP8_BLOCK

Tensor = torch.Tensor
# an argument a side may write in place -> what it must hold after the call, from the
# pristine arguments
Written = Mapping[str, Callable[..., Tensor]]
RANK_FN = "fused_contract:contract_rank"
QUANT_MODES = ("per_tensor_static", "per_tensor_dynamic", "per_token_dynamic", "block")


class ContractError(AssertionError):
    """A fused op broke its contract; the message says how."""


@dataclass(frozen=True)
class FusedCase:
    """One call of a fused op: ``build(dtype, fp8, gen)`` gives its arguments, ``reference``
    computes the unfused result from them."""

    fused_op: str
    id: str
    build: Callable[[torch.dtype, torch.dtype | None, torch.Generator], tuple[Any, ...]]
    reference: Callable[..., tuple[Tensor, ...]]
    fp8: bool = False  # needs the platform's fp8 dtype
    world: int = 1  # gloo ranks the case runs on (a collective op's: two)
    fused_writes: Written = field(default_factory=dict)
    reference_writes: Written = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.fused_op}/{self.id}"

    def args(self, dtype: torch.dtype, fp8: torch.dtype | None, seed: int) -> tuple[Any, ...]:
        """Seeded per rank: on a process group the ranks' inputs differ."""
        rank = dist.get_rank() if self.world > 1 and dist.is_initialized() else 0
        return self.build(dtype, fp8, torch.Generator().manual_seed(seed + 7919 * rank))


def _randn(gen: torch.Generator, *shape: int, dtype: torch.dtype, scale: float = 1.0) -> Tensor:
    return (torch.randn(*shape, generator=gen) * scale).to(dtype)


def _norm_weight(gen: torch.Generator, h: int, dtype: torch.dtype) -> Tensor:
    return _randn(gen, h, dtype=dtype, scale=0.1) + 1


def _add_norm(shape: tuple[int, ...], strided_residual: bool) -> FusedCase:
    def build(dt: torch.dtype, fp8: Any, g: torch.Generator) -> tuple[Any, ...]:
        x = _randn(g, *shape, dtype=dt)
        if strided_residual:  # rows out of a wider buffer, as a sliced residual stream
            residual = _randn(g, *shape[:-1], shape[-1] + 5, dtype=dt)[..., 2:shape[-1] + 2]
        else:
            residual = _randn(g, *shape, dtype=dt)
        return x, residual, _norm_weight(g, shape[-1], dt), 1e-6

    def ref(x: Tensor, residual: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, ...]:
        # the unfused op, as the engine calls it: it writes the sum into ``residual``
        return reference.add_rms_norm(x, residual, weight, eps), residual.clone()

    def summed(x: Tensor, residual: Tensor, *_: Any) -> Tensor:
        return (x.float() + residual.float()).to(residual.dtype)

    layout = "residual-strided" if strided_residual else "contiguous"
    return FusedCase("fused_add_rms_norm", f"{len(shape)}d-{layout}", build, ref,
                     reference_writes={"residual": summed})


def _quant_args(fp8: Any, mode: str) -> tuple[Any, ...]:
    scale = torch.tensor([0.02]) if mode == "per_tensor_static" else None
    return fp8, mode, scale, FP8_BLOCK


def _norm_quant(mode: str, shape: tuple[int, ...]) -> FusedCase:
    def build(dt: torch.dtype, fp8: Any, g: torch.Generator) -> tuple[Any, ...]:
        x = _randn(g, *shape, dtype=dt)
        return (x, _norm_weight(g, shape[-1], dt), 1e-6, *_quant_args(fp8, mode))

    def ref(x: Tensor, weight: Tensor, eps: float, *quant: Any) -> tuple[Tensor, ...]:
        return reference.fp8_quant(reference.rms_norm(x, weight, eps), *quant)

    return FusedCase("rms_norm_fp8_quant", mode.replace("_", "-"), build, ref, fp8=True)


def _silu_quant(mode: str, shape: tuple[int, ...]) -> FusedCase:
    def build(dt: torch.dtype, fp8: Any, g: torch.Generator) -> tuple[Any, ...]:
        return (_randn(g, *shape, dtype=dt, scale=2.0), *_quant_args(fp8, mode))

    def ref(x: Tensor, *quant: Any) -> tuple[Tensor, ...]:
        return reference.fp8_quant(reference.silu_and_mul(x), *quant)

    return FusedCase("silu_and_mul_fp8_quant", mode.replace("_", "-"), build, ref, fp8=True)


def _all_reduce_norm() -> FusedCase:
    """On two gloo ranks whose inputs differ: an all-reduce written into ``x`` changes it.
    The reference is the unfused eager path, refengine::all_reduce then rms_norm."""

    def build(dt: torch.dtype, fp8: Any, g: torch.Generator) -> tuple[Any, ...]:
        x = _randn(g, 7, 96, dtype=dt)
        return x, _norm_weight(g, 96, dt), 1e-6, world_group_name()

    def ref(x: Tensor, weight: Tensor, eps: float, group: str) -> tuple[Tensor, ...]:
        return (reference.rms_norm(torch.ops.refengine.all_reduce(x, group), weight, eps),)

    return FusedCase("all_reduce_rms_norm", "2ranks", build, ref, world=2)


# Odd sizes; 3-D inputs; each quantisation mode with a partial last block in block mode.
CASES: tuple[FusedCase, ...] = (
    _add_norm((7, 96), False),
    _add_norm((2, 5, 96), True),
    *(_norm_quant(mode, (3, 5, 2 * FP8_BLOCK + 72)) for mode in QUANT_MODES),
    *(_silu_quant(mode, (9, 2 * (FP8_BLOCK + 40))) for mode in QUANT_MODES),
    _all_reduce_norm(),
)


def writable(fused_op: str) -> tuple[str, ...]:
    """The arguments the op's schema declares written (``Tensor(a!)``)."""
    schema = getattr(torch.ops.refengine, fused_op).default._schema
    return tuple(a.name for a in schema.arguments
                 if a.alias_info is not None and a.alias_info.is_write)


def _tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _same_bits(a: Tensor, b: Tensor) -> bool:
    return (a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride()
            and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


def _fake_outputs(op: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fakes = tuple(mode.from_tensor(a) if isinstance(a, Tensor) else a for a in args)
        return _tuple(op(*fakes))


def _structure(label: str, got: tuple[Any, ...], want: tuple[Tensor, ...]) -> list[str]:
    if len(got) != len(want):
        return [f"{label} {len(got)} outputs, the unfused computation {len(want)}"]
    problems = []
    for i, (out, ref) in enumerate(zip(got, want, strict=True)):
        for what, have, should in (("dtype", out.dtype, ref.dtype),
                                   ("shape", tuple(out.shape), tuple(ref.shape)),
                                   ("device", out.device.type, ref.device.type)):
            if have != should:
                problems.append(f"{label} output {i} {what} {have}, the unfused "
                                f"computation gives {should}")
    return problems


def _written(side: str, declared: str, names: list[str], args: tuple[Any, ...],
             pristine: tuple[Any, ...], writes: Written) -> list[str]:
    """What ``side`` did to its inputs against what it may: ``writes`` (name -> the value
    it must hold after the call, from the pristine arguments); all else bit-identical."""
    problems = []
    for name, arg, before in zip(names, args, pristine, strict=True):
        if not isinstance(arg, Tensor):
            continue
        if name in writes:
            want = writes[name](*pristine).contiguous()
            if not (arg.stride() == before.stride() and _same_bits(arg.contiguous(), want)):
                problems.append(f"{side} left its input {name!r} other than {declared} "
                                "declares it written")
        elif not _same_bits(arg, before):
            problems.append(f"{side} wrote its input {name!r}, which {declared} does not "
                            "declare written")
    return problems


def problems(case: FusedCase, dtype: torch.dtype, fp8: torch.dtype | None,
             seed: int) -> list[str]:
    """How one fused op breaks its contract on one case (empty: it keeps it)."""
    op = getattr(torch.ops.refengine, case.fused_op).default
    names = [a.name for a in op._schema.arguments]
    found = []
    if set(case.fused_writes) != set(writable(case.fused_op)):
        found.append(f"the case declares {sorted(case.fused_writes)} written, the schema "
                     f"{sorted(writable(case.fused_op))}")
    ref_args, pristine = case.args(dtype, fp8, seed), case.args(dtype, fp8, seed)
    want = _tuple(case.reference(*ref_args))
    found += _written("the eager reference", "the contract", names, ref_args, pristine,
                      case.reference_writes)
    args = case.args(dtype, fp8, seed)
    got = _tuple(op(*args))
    found += _structure("returned", got, want)
    found += _written("the fused op", "its schema", names, args, pristine, case.fused_writes)
    found += _structure("its fake returned", _fake_outputs(op, pristine), want)
    again = _tuple(op(*case.args(dtype, fp8, seed)))
    found += [f"output {i} differs between two calls on the same inputs"
              for i, (a, b) in enumerate(zip(got, again, strict=False))
              if isinstance(a, Tensor) and isinstance(b, Tensor) and not _same_bits(a, b)]
    return found


def check(case: FusedCase, dtype: torch.dtype, fp8: torch.dtype | None, seed: int) -> None:
    """The whole contract of one fused op on one case, in this process (a collective op's:
    on the process group already started); raises ContractError."""
    found = problems(case, dtype, fp8, seed)
    if found:
        raise ContractError(f"{case.name}: " + "; ".join(found))


def contract_rank(rank: int, world: int, name: str, dtype: str, fp8: str, seed: int,
                  kernels: Any) -> list[str]:
    """One rank's share of ``check_on_ranks``: the case's problems seen from this rank."""
    from refengine import registry

    case = next(c for c in CASES if c.name == name)
    with registry.using(kernels or registry.Registry({})):
        found = problems(case, getattr(torch, dtype), getattr(torch, fp8) if fp8 else None,
                         seed)
    return [f"rank {rank}: {p}" for p in found]


def contract_ranks_dtypes(rank: int, world: int, rank_fn: str, name: str,
                          dtypes: list[str], fp8: str, seed: int,
                          kernels: Any) -> dict[str, list[str] | BaseException]:
    """One rank's share for several dtypes in one process group (one spawn, not one a
    dtype): each dtype's problems, or what that dtype's check raised (s390x's gloo refuses
    a bf16 all_reduce; its fp32 case must still be judged on its own)."""
    import importlib

    module, _, attr = rank_fn.partition(":")
    fn = getattr(importlib.import_module(module), attr)
    out: dict[str, list[str] | BaseException] = {}
    for dtype in dtypes:
        try:
            out[dtype] = fn(rank, world, name, dtype, fp8, seed, kernels)
        except Exception as exc:  # kept for that dtype's test, raised there
            out[dtype] = exc
    return out


BATCH_FN = "fused_contract:contract_ranks_dtypes"
# (case, dtypes, fp8, seed, registry, rank fn) -> each dtype's rank results, so the
# platform's dtypes of one case share one spawn of the ranks in this process.
_BY_DTYPE: dict[tuple[Any, ...], dict[str, list[list[str] | BaseException]]] = {}


def check_on_ranks(case: FusedCase, dtype: torch.dtype, fp8: torch.dtype | None, seed: int,
                   kernels: Any, workdir: Path, rank_fn: str = RANK_FN, *,
                   dtypes: tuple[str, ...] = ()) -> None:
    """``check`` on ``case.world`` gloo ranks (refengine.fusion.tp.run_ranks), each with its
    own inputs and ``kernels`` (the registry) installed; raises ContractError naming the
    rank, or what a rank raised. ``dtypes``: the platform's dtypes, checked in the same
    spawn and kept for their own tests."""
    import pickle

    from refengine.fusion.tp import run_ranks

    name = str(dtype).removeprefix("torch.")
    fp8_name = str(fp8).removeprefix("torch.") if fp8 is not None else ""
    wanted = tuple(dict.fromkeys((*dtypes, name)))
    # the registry by content: each test installs its own, made alike from the platform
    key = (case.name, case.world, wanted, fp8_name, seed, pickle.dumps(kernels), rank_fn)
    if key not in _BY_DTYPE:
        ranks = run_ranks(case.world, workdir, BATCH_FN,
                          (rank_fn, case.name, list(wanted), fp8_name, seed, kernels))
        _BY_DTYPE[key] = {d: [rank[d] for rank in ranks] for d in wanted}
    results = _BY_DTYPE[key][name]
    for result in results:
        if isinstance(result, BaseException):
            raise result
    found = [p for rank in results if isinstance(rank, list) for p in rank]
    if found:
        raise ContractError(f"{case.name}: " + "; ".join(found))
