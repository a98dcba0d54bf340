"""Check each fused node's arguments against the pattern it replaced.

A pass can keep its matched count and still compute something else: a handler that
passes another epsilon, quantisation mode, group size or group name to the fused op.
The numerics of a small block may not show it (an epsilon of 1e-6 or 1e-5 moves a bf16
norm by less than its tolerance). So the arguments are checked directly, against a
statement written apart from the handlers: for each fused op, which argument of which
node of the unfused pattern (a producer feeding its first output into a consumer) each
fused argument must be.

The backend wraps each pass's handler (``audited``): before the handler runs, the
arguments the fused op must get are read from the matched nodes themselves; afterwards
the one fused node the handler inserted is compared with them (graph nodes by identity,
constants by value).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from refengine.fusion import fused_ops  # noqa: F401  (registers refengine::* used below)

ops = torch.ops.refengine


@dataclass(frozen=True)
class Source:
    """A fused op's unfused form: ``consumer(producer(...), ...)`` and where each of the
    fused op's arguments comes from, as (``"producer"`` | ``"consumer"``, argument name)."""

    producer: Any
    consumer: Any
    args: tuple[tuple[str, str], ...]


SOURCES: dict[str, Source] = {
    "rms_norm_fp8_quant": Source(
        ops.rms_norm.default,
        ops.fp8_quant.default,
        (("producer", "x"), ("producer", "weight"), ("producer", "eps"),
         ("consumer", "fp8_dtype"), ("consumer", "mode"), ("consumer", "scale"),
         ("consumer", "group_size")),
    ),
    "silu_and_mul_fp8_quant": Source(
        ops.silu_and_mul.default,
        ops.fp8_quant.default,
        (("producer", "x"), ("consumer", "fp8_dtype"), ("consumer", "mode"),
         ("consumer", "scale"), ("consumer", "group_size")),
    ),
    "fused_add_rms_norm": Source(
        torch.ops.aten.add.Tensor,
        ops.rms_norm.default,
        (("producer", "self"), ("producer", "other"), ("consumer", "weight"),
         ("consumer", "eps")),
    ),
    "all_reduce_rms_norm": Source(
        ops.all_reduce.default,
        ops.rms_norm.default,
        (("producer", "x"), ("consumer", "weight"), ("consumer", "eps"),
         ("producer", "group_name")),
    ),
}


def bound_args(node: torch.fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name, defaults filled in."""
    schema = node.target._schema  # type: ignore[union-attr]
    values: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            values[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            values[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            values[arg.name] = arg.default_value
    return values


def _key(value: Any) -> Any:
    """Nodes compare by identity, constants by value (floats exactly)."""
    if isinstance(value, torch.fx.Node):
        return ("node", id(value))
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    return ("const", type(value).__name__, repr(value))


def _show(call: tuple[Any, ...]) -> str:
    return "(" + ", ".join(v.name if isinstance(v, torch.fx.Node) else repr(v)
                           for v in call) + ")"


def fused_target(fused_op: str) -> Any:
    return getattr(ops, fused_op).default


def fused_nodes(graph: torch.fx.Graph, fused_op: str) -> list[torch.fx.Node]:
    target = fused_target(fused_op)
    return [n for n in graph.nodes if n.op == "call_function" and n.target == target]


def expected_call(fused_op: str, root: torch.fx.Node) -> tuple[Any, ...] | str:
    """The fused op's arguments for the pattern rooted at ``root`` (the consumer), read
    from the graph nodes themselves; or why the match is not the declared pattern."""
    source = SOURCES[fused_op]
    producer = root.args[0] if root.args else None
    if root.target != source.consumer or not (
            isinstance(producer, torch.fx.Node) and producer.target == source.producer):
        return (f"matched {root.format_node()}, not the declared "
                f"{source.consumer}({source.producer}(...))")
    roles = {"producer": bound_args(producer), "consumer": bound_args(root)}
    return tuple(roles[role].get(name) for role, name in source.args)


def audited(pass_name: str, fused_op: str, handler: Callable[..., None],
            sink: list[str]) -> Callable[..., None]:
    """``handler`` wrapped: each match's expected arguments are read before it runs, and
    the one fused node it inserts is compared with them afterwards; problems go to sink."""

    def run(match: Any, *args: Any, **kwargs: Any) -> None:
        if fused_op not in SOURCES:
            sink.append(f"{pass_name}: no declared source pattern for fused op {fused_op}")
            handler(match, *args, **kwargs)
            return
        graph = match.graph
        expected = expected_call(fused_op, match.output_node())
        before = set(fused_nodes(graph, fused_op))
        nodes = list(graph.nodes)
        handler(match, *args, **kwargs)
        added = [n for n in fused_nodes(graph, fused_op) if n not in before]
        if not added and list(graph.nodes) == nodes:
            return  # the handler left the graph alone: nothing fused (the counts judge that)
        if isinstance(expected, str):
            sink.append(f"{pass_name}: {expected}")
            return
        if len(added) != 1:
            sink.append(f"{pass_name}: one match inserted {len(added)} {fused_op} nodes, not 1")
            return
        names = [a.name for a in fused_target(fused_op)._schema.arguments]
        values = bound_args(added[0])
        call = tuple(values.get(n) for n in names)
        if tuple(_key(v) for v in call) != tuple(_key(v) for v in expected):
            wrong = [f"{n}={_show((got,))[1:-1]} (pattern: {_show((want,))[1:-1]})"
                     for n, got, want in zip(names, call, expected, strict=True)
                     if _key(got) != _key(want)]
            sink.append(f"{pass_name}: fused {fused_op} got {', '.join(wrong)}")

    return run
