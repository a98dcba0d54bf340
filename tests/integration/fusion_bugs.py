"""Plausible one-line bugs in the fusion passes' handlers, for test_fusion_catches_bugs.py.

Each keeps the pattern (so the matched count stays what the expectation file says) and
changes what the fused node computes. Importable in spawned tensor-parallel ranks (they
inherit sys.path), so the same bug can run on 2 gloo ranks.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any

import torch

from refengine.fusion import passes
from refengine.model.blocks import HIDDEN, INTER, TPMLPBlock

ops = torch.ops.refengine
_DEFS = {d.name: d for d in passes.PASS_DEFS}


def _with(name: str, handler: Any) -> tuple[passes.PassDef, ...]:
    return tuple(dataclasses.replace(d, handler=handler) if d.name == name else d
                 for d in passes.PASS_DEFS)


def _rms_quant_eps_default(match: Any, **kw: Any) -> None:
    # the fused op gets the norm's default epsilon, not the pattern's
    passes._replace_root(match, ops.rms_norm_fp8_quant.default,
                         (kw["x"], kw["weight"], 1e-5, kw["fp8_dtype"], kw["mode"],
                          kw["scale"], kw["group_size"]))


def _silu_quant_per_tensor(match: Any, **kw: Any) -> None:
    # per-tensor instead of the pattern's per-token scales
    passes._replace_root(match, ops.silu_and_mul_fp8_quant.default,
                         (kw["x"], kw["fp8_dtype"], "per_tensor_dynamic", kw["scale"],
                          kw["group_size"]))


def _rms_quant_group_64(match: Any, **kw: Any) -> None:
    # a hard-coded group size (harmless in per-token mode: only the audit sees it)
    passes._replace_root(match, ops.rms_norm_fp8_quant.default,
                         (kw["x"], kw["weight"], kw["eps"], kw["fp8_dtype"], kw["mode"],
                          kw["scale"], 64))


def _add_rms_drops_residual(match: Any, **kw: Any) -> None:
    # the sum's other users keep reading the old residual: the residual update is lost
    graph = match.graph
    norm = match.output_node()
    summed = norm.args[0]
    with graph.inserting_before(summed):
        fused = graph.call_function(
            ops.fused_add_rms_norm.default, (kw["x"], kw["residual"], kw["weight"], kw["eps"]))
        out = graph.call_function(operator.getitem, (fused, 0))
    fused.meta["val"] = (norm.meta["val"], summed.meta["val"])
    out.meta["val"] = norm.meta["val"]
    norm.replace_all_uses_with(out)
    summed.replace_all_uses_with(kw["residual"])
    match.erase_nodes()


def _ar_rms_eps_scaled(match: Any, **kw: Any) -> None:
    passes._replace_root(match, ops.all_reduce_rms_norm.default,
                         (kw["x"], kw["weight"], kw["eps"] * 10, kw["group_name"]))


WRONG_EPS = _with("rms_norm_quant", _rms_quant_eps_default)
WRONG_QUANT_MODE = _with("silu_mul_quant", _silu_quant_per_tensor)
WRONG_GROUP_SIZE = _with("rms_norm_quant", _rms_quant_group_64)
DROPPED_RESIDUAL = _with("add_rms_norm", _add_rms_drops_residual)
TP_WRONG_EPS = _with("all_reduce_rms_norm", _ar_rms_eps_scaled)


class GateRowsOnlyTPMLP(TPMLPBlock):
    """Shards the merged gate/up weight as one [2 * INTER, HIDDEN] matrix: rank 0 gets only
    gate rows, rank 1 only up rows. Sharded eager and sharded fused agree (same weights)."""

    @staticmethod
    def shard(w13: torch.Tensor, w2: torch.Tensor, rank: int,
              world: int) -> tuple[torch.Tensor, torch.Tensor]:
        part = INTER // world
        merged = w13.reshape(2 * INTER, HIDDEN)
        return merged[rank * 2 * part:(rank + 1) * 2 * part], w2[:, rank * part:(rank + 1) * part]


def all_reduce_rms_norm_in_place(x: torch.Tensor, weight: torch.Tensor, eps: float,
                                 group_name: str) -> torch.Tensor:
    # the fused kernel reduces the caller's tensor instead of a copy
    import torch.distributed as dist

    from refengine.fusion import fused_ops
    from refengine.ops.collective import process_group

    dist.all_reduce(x, group=process_group(group_name))
    return fused_ops._run("rms_norm", x, weight, eps)  # type: ignore[no-any-return]


def contract_rank_all_reduce_in_place(rank: int, world: int, *args: Any) -> list[str]:
    """fused_contract.contract_rank with all_reduce_in_place as the native fused kernel."""
    from fused_contract import contract_rank

    from refengine.fusion import fused_ops

    fused_ops.FUSED_KERNELS["all_reduce_rms_norm"][1]["native"] = all_reduce_rms_norm_in_place
    return contract_rank(rank, world, *args)
