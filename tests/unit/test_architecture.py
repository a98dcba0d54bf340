"""The layout stays readable: rooms (packages) import only what ``ALLOWED`` lets them (so
one way, no cycle), the modules inside a room import each other one way too, few loose
modules, no module over 400 lines and no function over 60, except the exceptions listed
here.

docs/architecture.md describes the rooms and states the same map. An exception is a debt
with a reason; the test fails when one is no longer needed, so the list only shrinks.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Mapping
from itertools import pairwise
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"
REFENGINE = HARNESS.parent / "refengine"

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_LOOSE = 5
ENTRY_MODULES = {"__init__", "__main__", "cli", "errors"}

# room -> the rooms it may import (a loose module under harness/ is a room of its own).
# Every room may import ``errors`` (the one base of user-facing failures). Read top to
# bottom, a room imports only rooms listed above it. Keep docs/architecture.md in step.
EVERYONE = frozenset({"errors"})
# The room that holds SQL: the history (its schema, its writer and its read API). Every
# other room reads the history through history/read.py or history/window.py.
SQL_ROOMS = frozenset({"history"})
ALLOWED: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "digest": frozenset(),
    "roots": frozenset(),
    "filelock": frozenset(),
    "results": frozenset(),
    # writefail: a full disk while a log is teed says so like any other write
    "process": frozenset({"results"}),
    # results.testids: known failures name tests as the run folder does
    "matrix": frozenset({"results", "roots"}),
    # results: the host fingerprint is the run record's typed HostRecord (results/facts.py)
    "platform": frozenset({"digest", "matrix", "process", "results", "roots"}),
    "runners": frozenset({"matrix", "platform", "process", "results", "roots"}),
    "history": frozenset({"filelock", "results", "roots"}),
    # durations from the history's read API (history/read.py: typed rows, no SQL here)
    "shard": frozenset({"history", "results"}),
    # process: `git diff` / `git merge-base` go through the one process helper;
    # history: an engine change selects by the lanes' op record (history/read.py)
    "select": frozenset({"history", "matrix", "process", "results"}),
    # shard, select: the shard and selection plugins (plugin/shard.py, plugin/select.py)
    # plan with those rooms' pure code inside the suite's pytest
    "plugin": frozenset({"matrix", "platform", "results", "select", "shard"}),
    "reports": frozenset({"history", "matrix", "results", "roots"}),
    # history: the database's path, and its read API for progress estimates
    "run": frozenset({"filelock", "history", "matrix", "platform", "process", "results",
                      "roots", "runners", "select", "shard"}),
    "repro": frozenset({"matrix", "platform", "process", "results", "run"}),
    # results: a step's run folder read by the one run-folder reader;
    # process: each step is a `harness run` subprocess, the commits come from git;
    # matrix: the one grammar of a pin on a command line (matrix/requirements.py)
    "bisect": frozenset({"matrix", "process", "results"}),
    # process: checkout hygiene runs git
    "ci": frozenset({"matrix", "process", "results", "select", "shard"}),
    # a Buildkite step file read as suites (pure parsing: only errors)
    "importers": frozenset(),
    # the subcommands wire the rooms together; nothing imports them but the CLI
    "commands": frozenset({"bisect", "ci", "history", "importers", "matrix", "platform",
                           "plugin", "process", "reports", "repro", "results", "roots", "run",
                           "runners", "select", "shard"}),
    # (cli loads commands/ by name, cli.COMMANDS, so no import names it)
    "cli": frozenset({"results"}),
    "__main__": frozenset({"cli"}),
    "pytest_entry": frozenset({"plugin"}),
}

# path relative to harness/ -> why it is longer
MODULE_EXCEPTIONS: dict[str, str] = {}
# "path::function" -> why it is longer
FUNCTION_EXCEPTIONS: dict[str, str] = {
    "history/ingest.py::ingest_paths": "one transaction over parse, write and skip bookkeeping",
}


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
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


@functools.cache
def room_graph(root: Path = HARNESS) -> dict[str, dict[str, tuple[str, str]]]:
    """room -> {room it imports: (one importing module, the module imported)}."""
    known = _modules(root)
    graph: dict[str, dict[str, tuple[str, str]]] = {}
    for name, path in known.items():
        for target in _imported(name, path, known):
            a, b = room(name), room(target)
            if a != b and a != "harness" and b != "harness":
                graph.setdefault(a, {}).setdefault(b, (name, target))
    return graph


@functools.cache
def module_graph(root: Path = HARNESS) -> dict[str, dict[str, str]]:
    """module -> {module of the same room it imports: that room}: the imports inside a room."""
    known = _modules(root)
    graph: dict[str, dict[str, str]] = {}
    for name, path in known.items():
        for target in _imported(name, path, known):
            if target != name and room(target) == room(name) != "harness":
                graph.setdefault(name, {})[target] = room(name)
    return graph


def breaches(graph: Mapping[str, Mapping[str, tuple[str, str]]],
             allowed: Mapping[str, frozenset[str]]) -> list[str]:
    """Each import between rooms the map does not allow, as a line a person can act on."""
    found = []
    for a, targets in sorted(graph.items()):
        for b, (importer, imported) in sorted(targets.items()):
            if a not in allowed:
                found.append(f"{a}: a room the map does not know ({importer})")
            elif b not in allowed[a] | EVERYONE:
                found.append(f"{a} -> {b}: {importer} imports {imported}")
    return found


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


def test_the_map_is_one_way_and_names_only_rooms() -> None:
    order = list(ALLOWED)
    upward = [f"{a} -> {b}" for a, targets in ALLOWED.items() for b in targets
              if order.index(b) >= order.index(a)]
    assert not upward, f"a room may import only rooms listed above it: {upward}"
    rooms = {room(name) for name in _modules(HARNESS)} - {"harness"}
    assert rooms == set(ALLOWED), "add the new room to ALLOWED (and docs/architecture.md)"
    assert all(targets <= set(ALLOWED) for targets in ALLOWED.values())


def test_rooms_import_only_what_the_map_allows() -> None:
    found = breaches(room_graph(), ALLOWED)
    assert not found, "imports the map does not allow (fix the import, or widen ALLOWED " \
        "with the reason and docs/architecture.md):\n" + "\n".join(found)


def test_every_allowance_is_used() -> None:
    """The map states what the code does: an edge no import needs any more is dropped."""
    graph = room_graph()
    unused = sorted(f"{a} -> {b}" for a, targets in ALLOWED.items() for b in targets
                    if b not in graph.get(a, {}))
    assert not unused, f"no import needs these, drop them from ALLOWED and the doc: {unused}"


def test_a_breach_of_the_map_is_found(tmp_path: Path) -> None:
    """A results module importing run inside a function, and a new room, both fail."""
    tree = tmp_path / "harness"
    for folder, source in {
        "results": "def late():\n    from harness.run.plan import plan\n    return plan\n",
        "run": "from harness.results import late\n\ndef plan() -> None: ...\n",
        "attic": "import harness.results\n",
    }.items():
        (tree / folder).mkdir(parents=True)
        (tree / folder / "__init__.py").write_text(source)
    (tree / "run" / "plan.py").write_text("def plan() -> None: ...\n")
    graph = room_graph(tree)
    assert graph == {"results": {"run": ("harness.results", "harness.run.plan")},
                     "run": {"results": ("harness.run", "harness.results")},
                     "attic": {"results": ("harness.attic", "harness.results")}}
    assert breaches(graph, ALLOWED) == [
        "attic: a room the map does not know (harness.attic)",
        "results -> run: harness.results imports harness.run.plan",
    ]
    assert find_cycle(graph) == ["results", "run", "results"]


def test_rooms_import_each_other_one_way() -> None:
    graph = room_graph()
    assert "run" in graph and "runners" in graph["run"]  # the graph sees real imports
    cycle = find_cycle(graph)
    if cycle:
        edges = [f"{a} -> {b} ({' imports '.join(graph[a][b])})" for a, b in pairwise(cycle)]
        raise AssertionError("import cycle between rooms:\n" + "\n".join(edges))


def test_modules_inside_a_room_import_each_other_one_way(tmp_path: Path) -> None:
    """No module cycle inside a room either (a function-level import counts: it is how a
    cycle hides), and the check sees one."""
    tree = tmp_path / "harness" / "ci"
    tree.mkdir(parents=True)
    (tree / "__init__.py").write_text("")
    (tree / "pipeline.py").write_text("def generate() -> None:\n    from harness.ci import gh\n")
    (tree / "gh.py").write_text("from harness.ci.pipeline import generate\n")
    assert find_cycle(module_graph(tmp_path / "harness")) == [
        "harness.ci.gh", "harness.ci.pipeline", "harness.ci.gh"]

    graph = module_graph()
    assert "harness.run.workflow" in graph  # the graph sees real imports
    cycle = find_cycle(graph)
    assert not cycle, "import cycle inside a room: " + " -> ".join(cycle or ())


def test_refengine_modules_import_each_other_one_way() -> None:
    """No module cycle in refengine/ either (vllm_provider and vllm_paged once imported
    each other: the library choice is vllm_library's now), and the graph sees real imports."""
    known = _modules(REFENGINE)
    graph = {name: dict.fromkeys((t for t in _imported(name, path, known) if t != name), 1)
             for name, path in known.items()}
    assert "refengine.providers.vllm_library" in graph["refengine.providers.vllm_paged"]
    cycle = find_cycle(graph)
    assert not cycle, "import cycle in refengine: " + " -> ".join(cycle or ())


def test_sql_stays_in_the_history_and_the_report() -> None:
    outside = []
    for name, path in _modules(HARNESS).items():
        if room(name) in SQL_ROOMS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            outside += [f"{name} imports {m}" for m in imported if m.split(".")[0] == "sqlite3"]
    assert not outside, f"read the history through history/read.py or window.py: {outside}"


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
