"""The layout stays readable: rooms (packages) import each other one way, few loose modules,
no module over 400 lines and no function over 60, except the exceptions listed here.

docs/architecture.md describes the rooms. An exception is a debt with a reason; the test
fails when one is no longer needed, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from itertools import pairwise
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_LOOSE = 5
ENTRY_MODULES = {"__init__", "__main__", "cli", "errors"}

# path relative to harness/ -> why it is longer
MODULE_EXCEPTIONS: dict[str, str] = {}
# "path::function" -> why it is longer
FUNCTION_EXCEPTIONS: dict[str, str] = {
    "history/ingest.py::ingest_paths": "one transaction over parse, write and skip bookkeeping",
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(HARNESS.rglob("*.py")):
        parts = list(path.relative_to(HARNESS.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imported(name: str, path: Path, known: Mapping[str, Path]) -> Iterator[str]:
    """Every harness module ``path`` imports, at the top, inside functions or for typing."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        yield from (t for t in targets if t in known)


def room(module: str) -> str:
    """``harness.run.plan`` -> ``run``; a loose module is a room of its own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "harness"


def room_graph() -> dict[str, dict[str, tuple[str, str]]]:
    """room -> {room it imports: (one importing module, the module imported)}."""
    known = _modules()
    graph: dict[str, dict[str, tuple[str, str]]] = {}
    for name, path in known.items():
        for target in _imported(name, path, known):
            a, b = room(name), room(target)
            if a != b and a != "harness" and b != "harness":
                graph.setdefault(a, {}).setdefault(b, (name, target))
    return graph


def find_cycle(graph: Mapping[str, Mapping[str, object]]) -> list[str] | None:
    """One cycle (as a path that returns to its start), or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node):], node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, {})):
            found = visit(nxt, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return None


def test_find_cycle_finds_one_and_only_one() -> None:
    assert find_cycle({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": 1}, "b": {"c": 1}, "c": {}}) is None


def test_rooms_import_each_other_one_way() -> None:
    graph = room_graph()
    assert "run" in graph and "runners" in graph["run"]  # the graph sees real imports
    cycle = find_cycle(graph)
    if cycle:
        edges = [f"{a} -> {b} ({' imports '.join(graph[a][b])})" for a, b in pairwise(cycle)]
        raise AssertionError("import cycle between rooms:\n" + "\n".join(edges))


def test_few_loose_modules() -> None:
    loose = sorted(p.stem for p in HARNESS.glob("*.py") if p.stem not in ENTRY_MODULES)
    assert len(loose) <= MAX_LOOSE, f"loose modules under harness/: {loose}"


def _lengths() -> Iterator[tuple[str, str | None, int]]:
    for path in sorted(HARNESS.rglob("*.py")):
        rel = path.relative_to(HARNESS).as_posix()
        source = path.read_text(encoding="utf-8")
        yield rel, None, len(source.splitlines())
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield rel, node.name, (node.end_lineno or node.lineno) - node.lineno + 1


def test_module_and_function_sizes() -> None:
    too_long, needless = [], set(MODULE_EXCEPTIONS) | set(FUNCTION_EXCEPTIONS)
    for rel, function, lines in _lengths():
        key = rel if function is None else f"{rel}::{function}"
        limit = MAX_MODULE_LINES if function is None else MAX_FUNCTION_LINES
        if lines > limit:
            needless.discard(key)
            if key not in MODULE_EXCEPTIONS and key not in FUNCTION_EXCEPTIONS:
                too_long.append(f"{key}: {lines} lines (limit {limit})")
    assert not too_long, "split these (or list them with a reason):\n" + "\n".join(too_long)
    assert not needless, f"no longer over the limit, drop from the exceptions: {sorted(needless)}"
