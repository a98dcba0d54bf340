"""Change-based test selection: what a diff can affect, per lane, derived from the engine.

``select_changes(root, ref)`` reads ``git diff`` against the merge base of REF and HEAD,
the static import graph of the checkout (cached by file hashes), the registry's provider
and kernel tables and the matrices, and returns a ``Selection``: per lane, nothing / some
tests (rules) / all of it, each with the changed file that selected it. ``harness select``
prints it;
``harness run --changed-since`` hands the lane's part to pytest
(``harness.plugin.select``); ``harness ci pipeline --changed-since`` keeps the affected
lanes and sizes their shards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from harness.errors import UsageError
from harness.matrix import list_matrices
from harness.select.changes import changed_files, merge_base
from harness.select.derive import MatrixFootprint, derive, lanes_from_matrices
from harness.select.engine import EngineLayout, read_engine
from harness.select.engine_change import EngineChange
from harness.select.imports import build_graph, harness_cache
from harness.select.rules import LaneSelection, Rule, Selection, dump_lane, load_lane

__all__ = ["LaneSelection", "MatrixFootprint", "Rule", "Selection", "dump_lane", "load_lane",
           "select_changes", "select_files"]


def graph_cache() -> Path:
    return harness_cache() / "select" / "imports.json"


def select_files(root: Path, changed: Sequence[str], *, ref: str = "",
                 matrices: Sequence[str] = (), layout: EngineLayout | None = None,
                 engine_change: EngineChange | None = None, db: Path | None = None) -> Selection:
    layout = layout or EngineLayout()
    graph = build_graph(root, [t for t in layout.sources if (root / t).exists()],
                        cache=graph_cache())
    engine = read_engine(graph, layout)
    names = list(matrices) or list_matrices(root)
    lanes: list[MatrixFootprint] = lanes_from_matrices(root, names)
    selection = derive(changed, lanes, graph, engine, ref=ref)
    if engine_change is None:
        return selection
    return _with_engine(selection, engine_change, root, lanes, db)


def select_changes(root: Path, ref: str | None, *, matrices: Sequence[str] = (),
                   engine_change: EngineChange | None = None,
                   db: Path | None = None) -> Selection:
    """What a change selects: the harness checkout's since ``ref`` (None: no harness change),
    and the engine's source change (``engine_change``), read against the op record in the
    history ``db``."""
    if ref is None:
        return select_files(root, [], matrices=matrices, engine_change=engine_change, db=db)
    commit = merge_base(root, ref)
    return select_files(root, changed_files(root, commit), ref=commit, matrices=matrices,
                        engine_change=engine_change, db=db)


def _with_engine(selection: Selection, change: EngineChange, root: Path,
                 footprints: Sequence[MatrixFootprint], db: Path | None) -> Selection:
    from harness.history import default_db_path
    from harness.select.by_ops import derive_engine, engine_lane, engine_package
    from harness.select.native import read_native

    native = read_native(change.source)
    if not native.registrations:
        raise UsageError(f"--engine-source {change.label}: not an engine's source tree (no "
                         f"TORCH_LIBRARY registration under {native.native_root}/)")
    engine = engine_package(change)  # the capability a lane that runs it provides
    history = db or default_db_path(root)
    lanes = [engine_lane(lane.name, lane.family, lane.provides, engine, history)
             for lane in footprints]
    part = derive_engine(change, native, lanes)
    out = {}
    for name, lane in selection.lanes.items():
        reasons = part.full.get(name)
        if reasons:
            lane = replace(lane, full=True, reasons=lane.reasons + tuple(reasons), rules=())
        elif part.rules.get(name) and not lane.full:
            lane = replace(lane, rules=lane.rules + tuple(part.rules[name]))
        out[name] = lane
    return replace(selection, lanes=out, notes=selection.notes + tuple(part.notes),
                   engine=change.label, engine_changed=tuple(sorted(change.changed)),
                   engine_ops=tuple(sorted(part.reached.items())))
