"""What the engine's registry says, read from its source (no torch import).

- the provider table: provider name -> module (``BUILTIN`` in refengine/providers), the
  modules the registry loads by name;
- per provider, the kernel table: op -> kernel module (a dict entry in the provider's
  module naming a module of the checkout, e.g. the triton provider's ``KERNELS``);
- the fallback provider every registry ends with (``FALLBACK`` in refengine/registry.py).

The locations are the defaults of ``EngineLayout``; another engine names its own.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.select.imports import ImportGraph


@dataclass(frozen=True, kw_only=True)
class EngineLayout:
    provider_table: str = "refengine/providers/__init__.py"
    registry: str = "refengine/registry.py"
    fallback_name: str = "FALLBACK"
    # Where the engine and its suites live (the import graph covers these).
    sources: tuple[str, ...] = ("refengine", "suites", "harness", "tests", "bench", "scripts")


@dataclass(frozen=True, kw_only=True)
class Engine:
    providers: Mapping[str, str]  # provider -> its module's file
    kernels: Mapping[str, Mapping[str, frozenset[str]]]  # provider -> op -> kernel files
    fallback: str | None
    provider_table: str
    registry: str
    op_names: frozenset[str] = field(default_factory=frozenset)


def _constant(path: Path, name: str) -> str | None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if (any(isinstance(t, ast.Name) and t.id == name for t in targets)
                    and isinstance(value, ast.Constant) and isinstance(value.value, str)):
                return value.value
    return None


def read_engine(graph: ImportGraph, layout: EngineLayout) -> Engine:
    providers = {name: path for name, path in graph.keyed.get(layout.provider_table, ())}
    kernels: dict[str, dict[str, frozenset[str]]] = {}
    for name, module in providers.items():
        table: dict[str, set[str]] = {}
        for op, kernel_file in graph.keyed.get(module, ()):
            table.setdefault(op, set()).add(kernel_file)
        kernels[name] = {op: frozenset(files) for op, files in table.items()}
    ops = frozenset(op for table in kernels.values() for op in table)
    return Engine(providers=providers, kernels=kernels,
                  fallback=_constant(graph.root / layout.registry, layout.fallback_name),
                  provider_table=layout.provider_table, registry=layout.registry,
                  op_names=ops)
