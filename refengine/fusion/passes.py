"""The fusion passes: inductor pattern-matcher passes over the post-grad FX graph.

Each pass is one PatternMatcherPass holding one pattern whose handler rewrites the
match into a fused ``refengine::`` op; ``apply`` returns how many times it matched.
Passes run in PASS_NAMES order, so a norm consumed by a quant fusion is no longer
there for the add + norm fusion (the expectation files record the result).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch._inductor.pattern_matcher import (
    MULTIPLE,
    CallFunction,
    KeywordArg,
    Match,
    PatternExpr,
    PatternMatcherPass,
    register_graph_pattern,
)

from refengine.fusion import fused_ops

ops = torch.ops.refengine


def _quant_args() -> tuple[KeywordArg, ...]:
    return tuple(KeywordArg(n) for n in ("fp8_dtype", "mode", "scale", "group_size"))


def _replace_root(match: Match, target: Any, args: tuple[Any, ...]) -> None:
    """Swap the match's root for one call with the same outputs, then drop the rest."""
    root = match.output_node()
    with match.graph.inserting_before(root):
        fused = match.graph.call_function(target, args)
    # Only the output value: other meta (e.g. eager_input_vals) describes the old call.
    fused.meta["val"] = root.meta["val"]
    root.replace_all_uses_with(fused)
    match.erase_nodes()


def _rms_quant_pattern() -> PatternExpr:
    norm = CallFunction(
        ops.rms_norm.default, KeywordArg("x"), KeywordArg("weight"), KeywordArg("eps")
    )
    return CallFunction(ops.fp8_quant.default, norm, *_quant_args())


def _rms_quant(match: Match, **kw: Any) -> None:
    _replace_root(
        match,
        ops.rms_norm_fp8_quant.default,
        (
            kw["x"],
            kw["weight"],
            kw["eps"],
            kw["fp8_dtype"],
            kw["mode"],
            kw["scale"],
            kw["group_size"],
        ),
    )


def _silu_quant_pattern() -> PatternExpr:
    act = CallFunction(ops.silu_and_mul.default, KeywordArg("x"))
    return CallFunction(ops.fp8_quant.default, act, *_quant_args())


def _silu_quant(match: Match, **kw: Any) -> None:
    _replace_root(
        match,
        ops.silu_and_mul_fp8_quant.default,
        (kw["x"], kw["fp8_dtype"], kw["mode"], kw["scale"], kw["group_size"]),
    )


def _add_rms_pattern() -> PatternExpr:
    # The sum is the next layer's residual: it may have other users, which then read the
    # fused op's second output.
    summed = CallFunction(
        torch.ops.aten.add.Tensor, KeywordArg("x"), KeywordArg("residual"), _users=MULTIPLE
    )
    return CallFunction(ops.rms_norm.default, summed, KeywordArg("weight"), KeywordArg("eps"))


def _add_rms_check(match: Match) -> bool:
    # The fused node goes where the add was, so the weight must already exist there.
    weight = match.kwargs["weight"]
    same_dtype = all(
        isinstance(n, torch.fx.Node)
        and n.meta["val"].dtype == match.output_node().meta["val"].dtype
        for n in (match.kwargs["x"], match.kwargs["residual"])
    )
    return same_dtype and (
        not isinstance(weight, torch.fx.Node) or weight.op in ("placeholder", "get_attr")
    )


def _add_rms(match: Match, **kw: Any) -> None:
    graph = match.graph
    norm = match.output_node()
    summed = norm.args[0]
    assert isinstance(summed, torch.fx.Node)
    with graph.inserting_before(summed):
        fused = graph.call_function(
            ops.fused_add_rms_norm.default, (kw["x"], kw["residual"], kw["weight"], kw["eps"])
        )
        out = graph.call_function(operator.getitem, (fused, 0))
        new_sum = graph.call_function(operator.getitem, (fused, 1))
    fused.meta["val"] = (norm.meta["val"], summed.meta["val"])
    out.meta["val"] = norm.meta["val"]
    new_sum.meta["val"] = summed.meta["val"]
    norm.replace_all_uses_with(out)
    summed.replace_all_uses_with(new_sum)
    match.erase_nodes()


def _ar_rms_pattern() -> PatternExpr:
    reduced = CallFunction(ops.all_reduce.default, KeywordArg("x"), KeywordArg("group_name"))
    return CallFunction(ops.rms_norm.default, reduced, KeywordArg("weight"), KeywordArg("eps"))


def _ar_rms(match: Match, **kw: Any) -> None:
    _replace_root(
        match, ops.all_reduce_rms_norm.default, (kw["x"], kw["weight"], kw["eps"], kw["group_name"])
    )


@dataclass(frozen=True)
class PassDef:
    name: str
    fused_op: str
    needs_fp8: bool
    needs_distributed: bool
    pattern: Callable[[], PatternExpr]
    handler: Callable[..., None]
    check: Callable[[Match], bool] | None = None


PASS_DEFS: tuple[PassDef, ...] = (
    PassDef("rms_norm_quant", "rms_norm_fp8_quant", True, False, _rms_quant_pattern, _rms_quant),
    PassDef(
        "silu_mul_quant", "silu_and_mul_fp8_quant", True, False, _silu_quant_pattern, _silu_quant
    ),
    PassDef(
        "add_rms_norm",
        "fused_add_rms_norm",
        False,
        False,
        _add_rms_pattern,
        _add_rms,
        _add_rms_check,
    ),
    PassDef("all_reduce_rms_norm", "all_reduce_rms_norm", False, True, _ar_rms_pattern, _ar_rms),
)
PASS_NAMES: tuple[str, ...] = tuple(p.name for p in PASS_DEFS)

# The ops some pass could have fused: what is left of them afterwards is "unfused".
FUSABLE_OPS: tuple[str, ...] = ("rms_norm", "fp8_quant", "silu_and_mul", "all_reduce")


def build(defn: PassDef) -> PatternMatcherPass:
    """A fresh PatternMatcherPass for one definition (so a test can build a changed one)."""
    matcher = PatternMatcherPass(pass_name=f"refengine_{defn.name}")
    register_graph_pattern(
        defn.pattern(), extra_check=defn.check or (lambda m: True), pass_dict=matcher
    )(defn.handler)
    return matcher


def count_unfused(graph: torch.fx.Graph) -> dict[str, int]:
    targets = {getattr(ops, name).default: name for name in FUSABLE_OPS}
    counts = dict.fromkeys(FUSABLE_OPS, 0)
    for node in graph.nodes:
        if node.op == "call_function" and node.target in targets:
            counts[targets[node.target]] += 1
    return counts


__all__ = [
    "FUSABLE_OPS",
    "PASS_DEFS",
    "PASS_NAMES",
    "PassDef",
    "build",
    "count_unfused",
    "fused_ops",
]
