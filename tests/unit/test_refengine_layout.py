"""refengine's packages import each other one way, so none reaches itself through imports
(registry.py, a loose module, counts as a package of its own): ops/ at the bottom (the
custom ops reach the registry only through what it installs in ops/dispatch.py), the
providers and triton_kernels on it, the registry on the providers, the models on ops, and
the fusion passes on top. The models (model/) are what the fusion passes (fusion/) compile
and run, so fusion may read model and model never reads fusion; what both need (the
collective op) lives below both, in ops/."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from itertools import pairwise
from pathlib import Path

REFENGINE = Path(__file__).resolve().parents[2] / "refengine"


def _package(path: Path) -> str:
    """``refengine/model/decoder.py`` -> ``model``; a loose module is a package of its own."""
    return path.relative_to(REFENGINE).with_suffix("").parts[0]


def _imported(path: Path) -> Iterator[str]:
    """The refengine packages ``path`` imports: at the top, inside functions or for typing."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "refengine" and len(parts) > 1:
                yield parts[1]


def package_graph() -> dict[str, dict[str, str]]:
    """package -> {package it imports: one importing file}."""
    graph: dict[str, dict[str, str]] = {}
    for path in sorted(REFENGINE.rglob("*.py")):
        if path.parent == REFENGINE and path.name == "__init__.py":
            continue
        here = _package(path)
        for there in _imported(path):
            if there != here:
                graph.setdefault(here, {}).setdefault(there, str(path.relative_to(REFENGINE)))
    return graph


def path_back(graph: Mapping[str, Mapping[str, str]], start: str) -> list[str] | None:
    """A chain of imports from ``start`` back to itself, or None."""
    seen: set[str] = set()
    todo: list[list[str]] = [[start]]
    while todo:
        chain = todo.pop()
        for nxt in graph.get(chain[-1], {}):
            if nxt == start:
                return [*chain, start]
            if nxt not in seen:
                seen.add(nxt)
                todo.append([*chain, nxt])
    return None


def shown(graph: Mapping[str, Mapping[str, str]], chain: list[str]) -> str:
    """``ops (ops/custom.py) -> registry (registry.py) -> ops``: each step's importing file."""
    return " -> ".join(f"{a} ({graph[a][b]})" for a, b in pairwise(chain)) + f" -> {chain[-1]}"


def test_no_package_reaches_itself_through_imports() -> None:
    graph = package_graph()
    cycles = [chain for package in sorted(graph) if (chain := path_back(graph, package))]
    assert not cycles, "refengine import cycles:\n" + "\n".join(
        shown(graph, chain) for chain in cycles)


def test_ops_imports_no_other_refengine_package() -> None:
    imports = package_graph().get("ops", {})
    assert not imports, "ops/ is refengine's bottom, but " + ", ".join(
        f"refengine/{file} imports refengine.{there}" for there, file in imports.items())


def test_model_does_not_import_fusion() -> None:
    imports = package_graph().get("model", {})
    assert "fusion" not in imports, f"refengine/{imports['fusion']} imports refengine.fusion"


def test_the_check_sees_a_cycle() -> None:
    graph = {"model": {"ops": "model/a.py"}, "ops": {"fusion": "ops/b.py"},
             "fusion": {"model": "fusion/c.py"}}
    assert path_back(graph, "model") == ["model", "ops", "fusion", "model"]
    assert shown(graph, ["model", "ops", "fusion", "model"]) == (
        "model (model/a.py) -> ops (ops/b.py) -> fusion (fusion/c.py) -> model")
    assert path_back({"model": {"ops": "x"}, "ops": {"registry": "y"}}, "model") is None
