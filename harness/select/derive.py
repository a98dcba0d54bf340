"""Changed files -> what each lane must run (``Selection``), never listed by hand.

Where each answer comes from:

- a matrix file: the lanes whose ``extends:`` chain holds it, in full;
- an image recipe: the lanes whose ``image.dockerfile`` lives in that folder, in full
  and in their container;
- a Python file of the engine or the suites: the suite test modules (and conftests)
  whose static import graph reaches it; a provider module (the registry's provider
  table), or a file only it imports, also selects that provider's kernel tests; a
  kernel module of a provider's op table only that op's; the registry's fallback
  provider runs under every registry, so it selects every module that imports the
  registry;
- the harness: every suite where the pytest plugin imports the file, otherwise the
  platform suite of every lane; plus the harness's own tests whose imports reach it;
- the harness's own tests, benchmarks, docs: the tests that import or name them;
- anything else (build files, CI scripts, package data, a module nothing imports):
  everything, with the reason.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness.matrix import load_matrix
from harness.select.engine import Engine, EngineLayout
from harness.select.imports import ImportGraph
from harness.select.rules import LaneSelection, Rule, Selection

PLUGIN_ENTRIES = ("harness/pytest_entry.py", "harness/plugin/__init__.py")
SELF_TESTS = "tests"
PLATFORM_SUITE = "platform"
TEST_GLOBS = ("test_*.py", "*_test.py")
QUIET_TOPS = {"docs": "documentation", "bench": "a benchmark script",
              "scripts": "a maintenance script", "reports": "run output"}


@dataclass(frozen=True, kw_only=True)
class MatrixFootprint:
    """What change selection reads of one matrix (a lane): its files, suites, kernels, image."""

    name: str
    file: str  # repo-relative matrix file
    chain: tuple[str, ...]  # its file, then the files it extends
    suites: Mapping[str, str]  # enabled suite -> path
    kernels: Mapping[str, tuple[str, ...]]
    dockerfile: str | None
    family: str = ""  # cuda | rocm | xpu | cpu: the build an engine change reaches it by
    provides: frozenset[str] = frozenset()  # its capabilities (a lane that runs vllm: vllm)


@dataclass(kw_only=True)
class _Acc:
    full: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    docker: set[str] = field(default_factory=set)
    rules: dict[str, list[Rule]] = field(default_factory=dict)
    self_tests: list[Rule] = field(default_factory=list)
    everything: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)

    def add(self, lane: str, rule: Rule) -> None:
        self.rules.setdefault(lane, []).append(rule)


def lanes_from_matrices(root: Path, names: Sequence[str]) -> list[MatrixFootprint]:
    out = []
    for name in names:
        matrix = load_matrix(name, root)
        file = _rel(Path(matrix.file), root)
        out.append(MatrixFootprint(
            name=matrix.name, file=file, chain=_chain(root, file),
            suites={s.name: s.path.rstrip("/") for s in matrix.suites.values() if s.enabled},
            kernels={op: tuple(p) for op, p in matrix.kernels.items()},
            dockerfile=matrix.image.dockerfile, family=str(matrix.family),
            provides=matrix.capabilities.provides))
    return out


def _rel(path: Path, root: Path) -> str:
    try:
        return (path if path.is_absolute() else root / path).resolve().relative_to(
            root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _chain(root: Path, file: str) -> tuple[str, ...]:
    chain = [file]
    while len(chain) < 32:
        try:
            data = yaml.safe_load((root / chain[-1]).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            break
        parent = data.get("extends") if isinstance(data, dict) else None
        if not isinstance(parent, str):
            break
        nxt = _rel(root / Path(chain[-1]).parent / parent, root)
        if nxt in chain:
            break
        chain.append(nxt)
    return tuple(chain)


def _is_test(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, g) for g in TEST_GLOBS)


def suite_roots(graph: ImportGraph, suite_path: str) -> list[str]:
    """The files pytest imports for a suite: its test modules and conftests (and the
    conftests of the folders above it)."""
    prefix = suite_path.rstrip("/") + "/"
    roots = [f for f in graph.files if f.startswith(prefix)
             and (_is_test(f) or f.endswith("/conftest.py"))]
    parts = suite_path.strip("/").split("/")
    for n in range(len(parts)):
        above = "/".join([*parts[:n], "conftest.py"])
        if above in graph.files:
            roots.append(above)
    return roots


def _root_rule(root_file: str, source: str, why: str) -> Rule:
    # A conftest reaches every test module beside and below it.
    path = root_file.rsplit("/", 1)[0] if root_file.endswith("conftest.py") else root_file
    return Rule(kind="module", source=source, why=why, path=path)


def derive(changed: Sequence[str], lanes: Sequence[MatrixFootprint], graph: ImportGraph,
           engine: Engine, *, ref: str = "", layout: EngineLayout | None = None) -> Selection:
    acc = _Acc()
    plugin = _plugin_closure(graph)
    for path in changed:
        _classify(path, lanes, graph, engine, plugin, acc)
    return _finish(ref, changed, lanes, graph, engine, acc)


def _plugin_closure(graph: ImportGraph) -> frozenset[str]:
    """Every file the harness's pytest plugin runs: by import, or by name (``pytest_plugins``
    lists its sub-plugins as strings)."""
    seen = {f for f in PLUGIN_ENTRIES if f in graph.files}
    todo = list(seen)
    while todo:
        here = todo.pop()
        for dep in graph.static.get(here, frozenset()) | graph.dynamic.get(here, frozenset()):
            if dep.startswith("harness/") and dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return frozenset(seen)


def _classify(path: str, lanes: Sequence[MatrixFootprint], graph: ImportGraph, engine: Engine,
              plugin: frozenset[str], acc: _Acc) -> None:
    top = path.split("/", 1)[0]
    hit_lane = [lane for lane in lanes if path in lane.chain]
    if hit_lane:
        for lane in hit_lane:
            why = ("its matrix changed" if lane.chain[0] == path
                   else f"its matrix extends {path}")
            acc.full.setdefault(lane.name, []).append((path, why))
        return
    if top == "images":
        _image(path, lanes, acc)
        return
    if top == "harness":
        _harness(path, lanes, graph, engine, plugin, acc)
        return
    if top == SELF_TESTS:
        _self(path, graph, acc)
        return
    if path.endswith(".py") and path in graph.files:
        if _engine_file(path, lanes, graph, engine, acc):
            return
    elif any(path.startswith(s.rstrip("/") + "/") for lane in lanes for s in lane.suites.values()):
        for lane in lanes:  # data beside a suite (expectations, golden ids): that suite
            for suite in lane.suites.values():
                if path.startswith(suite + "/"):
                    acc.add(lane.name, Rule(kind="module", source=path, path=suite,
                                            why=f"data of the {suite} suite"))
        return
    if top in QUIET_TOPS or (path.endswith(".md") and "/" not in path):
        named = _self_tests_naming(path, graph)
        acc.self_tests.extend(Rule(kind="module", source=path, path=t,
                                   why="the test reads it") for t in named)
        if not named:
            what = QUIET_TOPS.get(top, "documentation")
            acc.notes.append((path, f"{what}: no test imports or names it"))
        return
    why = ("nothing the suites run imports it (it may be loaded by name)" if path.endswith(".py")
           else "no rule knows what this file affects")
    acc.everything.append((path, why))


def _image(path: str, lanes: Sequence[MatrixFootprint], acc: _Acc) -> None:
    folder = path.rsplit("/", 1)[0] + "/"
    users = [lane for lane in lanes if lane.dockerfile and lane.dockerfile.startswith(folder)]
    if not users:
        acc.notes.append((path, "an image recipe no lane builds"))
    for lane in users:
        acc.full.setdefault(lane.name, []).append((path, "its image recipe changed"))
        acc.docker.add(lane.name)


def _harness(path: str, lanes: Sequence[MatrixFootprint], graph: ImportGraph, engine: Engine,
             plugin: frozenset[str], acc: _Acc) -> None:
    if path.endswith(".py") and path in graph.files:
        _engine_file(path, lanes, graph, engine, acc)  # suite modules that import it
    if path in plugin:
        for lane in lanes:
            for suite in lane.suites.values():
                acc.add(lane.name, Rule(kind="module", source=path, path=suite,
                                        why="the harness's pytest plugin imports it"))
    else:
        for lane in lanes:
            if PLATFORM_SUITE in lane.suites:
                acc.add(lane.name, Rule(kind="module", source=path,
                                        path=lane.suites[PLATFORM_SUITE],
                                        why="a harness change runs the platform suite"))
    # The harness's own tests drive it through the CLI, which loads its commands by name:
    # the import graph cannot narrow them, so all of them run.
    acc.self_tests.append(Rule(kind="module", source=path, path=SELF_TESTS,
                               why="a harness change runs the harness's own tests"))


def _self(path: str, graph: ImportGraph, acc: _Acc) -> None:
    roots = suite_roots(graph, SELF_TESTS)
    hits = [r for r in roots if path in graph.closure(r)] if path.endswith(".py") else []
    if not path.endswith(".py"):
        hits = _self_tests_naming(path, graph) or [SELF_TESTS]
    for r in hits:
        acc.self_tests.append(_root_rule(r, path, "imports it" if path.endswith(".py")
                                         else "reads it"))
    if not hits and path.startswith(SELF_TESTS + "/"):
        acc.notes.append((path, "a test helper no test imports"))


def _self_tests_naming(path: str, graph: ImportGraph) -> list[str]:
    name = path.rsplit("/", 1)[-1]
    out = []
    for test in suite_roots(graph, SELF_TESTS):
        try:
            if name in (graph.root / test).read_text(encoding="utf-8"):
                out.append(test)
        except OSError:
            continue
    return out


def _engine_file(path: str, lanes: Sequence[MatrixFootprint], graph: ImportGraph, engine: Engine,
                 acc: _Acc) -> bool:
    """Module and kernel rules for a Python file of the engine or suites; False if none."""
    found = False
    registry_users = set()
    for lane in lanes:
        for suite in lane.suites.values():
            for root in suite_roots(graph, suite):
                closure = graph.closure(root)
                if path in closure:
                    acc.add(lane.name, _root_rule(root, path, "imports it"))
                    found = True
                if engine.registry in closure:
                    registry_users.add((lane.name, root))
    for provider, module in engine.providers.items():
        ops: set[str] | None = None
        if path in graph.closure(module):
            ops = set()  # every op
            why = f"provider {provider}'s module imports it" if path != module else \
                f"provider {provider}'s module"
        else:
            hit = {op for op, files in engine.kernels.get(provider, {}).items()
                   if path in graph.closure_of(files)}
            if hit:
                ops = hit
                why = f"provider {provider}'s kernel module for {', '.join(sorted(hit))}"
        if ops is None:
            continue
        found = True
        if provider == engine.fallback:
            for lane_name, root in sorted(registry_users):
                acc.add(lane_name, _root_rule(
                    root, path, f"{provider} is the registry's fallback: every registry "
                                "user runs it"))
        for lane in lanes:
            acc.add(lane.name, Rule(kind="kernel", source=path, why=why, provider=provider,
                                    ops=tuple(sorted(ops))))
    return found


def _finish(ref: str, changed: Sequence[str], lanes: Sequence[MatrixFootprint], graph: ImportGraph,
            engine: Engine, acc: _Acc) -> Selection:
    dispatching = tuple(sorted(
        f for lane in lanes for s in lane.suites.values() for f in suite_roots(graph, s)
        if _is_test(f) and engine.provider_table in graph.static.get(f, ())))
    ops = sorted({op for lane in lanes for op in lane.kernels} | set(engine.op_names))
    out: dict[str, LaneSelection] = {}
    for lane in lanes:
        reasons = list(acc.full.get(lane.name, []))
        reasons += [(f, f"unknown change: {w}") for f, w in acc.everything]
        out[lane.name] = LaneSelection(
            lane=lane.name, full=bool(reasons), docker=lane.name in acc.docker,
            reasons=tuple(reasons), rules=() if reasons else _dedupe(acc.rules.get(lane.name, [])),
            listed=dict(lane.kernels), dispatching=tuple(dict.fromkeys(dispatching)),
            providers=tuple(engine.providers), ops=tuple(ops))
    self_tests = list(acc.self_tests)
    if acc.everything:
        self_tests = [Rule(kind="module", source=f, why=f"unknown change: {w}", path=SELF_TESTS)
                      for f, w in acc.everything]
    return Selection(ref=ref, changed=tuple(changed), lanes=out,
                     everything=tuple(acc.everything), self_tests=_dedupe(self_tests),
                     notes=tuple(acc.notes))


def _dedupe(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    return tuple(dict.fromkeys(rules))

