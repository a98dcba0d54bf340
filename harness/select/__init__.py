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

import os
from collections.abc import Sequence
from pathlib import Path

from harness.matrix import list_matrices
from harness.select.changes import changed_files, merge_base
from harness.select.derive import MatrixFootprint, derive, lanes_from_matrices
from harness.select.engine import EngineLayout, read_engine
from harness.select.imports import build_graph
from harness.select.rules import LaneSelection, Rule, Selection, dump_lane, load_lane

__all__ = ["LaneSelection", "MatrixFootprint", "Rule", "Selection", "dump_lane", "load_lane",
           "select_changes", "select_files"]


def graph_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "harness" / "select" / "imports.json"


def select_files(root: Path, changed: Sequence[str], *, ref: str = "",
                 matrices: Sequence[str] = (), layout: EngineLayout | None = None) -> Selection:
    layout = layout or EngineLayout()
    graph = build_graph(root, [t for t in layout.sources if (root / t).exists()],
                        cache=graph_cache())
    engine = read_engine(graph, layout)
    lanes: list[MatrixFootprint] = lanes_from_matrices(root, list(matrices) or list_matrices(root))
    return derive(changed, lanes, graph, engine, ref=ref)


def select_changes(root: Path, ref: str, *, matrices: Sequence[str] = ()) -> Selection:
    commit = merge_base(root, ref)
    return select_files(root, changed_files(root, commit), ref=commit, matrices=matrices)
