"""``harness run --changed-since REF`` / ``--engine-source TREE --engine-change CHANGE``:
narrow one run to what the change affects."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness.matrix.model import Matrix
from harness.run.request import RunRequest
from harness.select import select_changes
from harness.select.changes import merge_base
from harness.select.engine_change import EngineChange


def narrow_request(request: RunRequest, root: Path, matrix: Matrix, ref: str | None,
                   engine_change: EngineChange | None = None) -> RunRequest | None:
    """The request narrowed to the lane's selection; None when nothing is affected."""
    commit = merge_base(root, ref) if ref else None
    selection = select_changes(root, commit, matrices=[matrix.file],
                               engine_change=engine_change)
    lane = next(iter(selection.lanes.values()))
    heads = []
    if ref:
        heads.append(f"--changed-since {ref} ({(commit or '')[:12]}): "
                     f"{len(selection.changed)} file(s)")
    if engine_change is not None:
        heads.append(f"engine change to {engine_change.label}: "
                     f"{len(engine_change.changed)} file(s)")
    head = "harness: " + "; ".join(heads)
    if not lane.affected:
        print(f"{head}; nothing on {matrix.name} is affected, nothing to run")
        return None
    if lane.full:
        why = "; ".join(f"{p}: {w}" for p, w in lane.reasons)
        print(f"{head}; {matrix.name} runs in full ({why})")
        docker = True if lane.docker and request.docker is None else request.docker
        return replace(request, changed_since=commit, docker=docker)
    paths = {s.name: s.path for s in matrix.suites.values() if s.enabled}
    reachable = lane.suites(paths)
    wanted = [s for s in (request.suites or reachable) if s in reachable]
    if not wanted:
        print(f"{head}; none of the asked suites is affected on {matrix.name}, nothing to run")
        return None
    sources = sorted({r.source for r in lane.rules})
    print(f"{head}; {matrix.name} runs the affected tests of {', '.join(wanted)} "
          f"(selected by {', '.join(sources)})")
    return replace(request, suites=tuple(wanted), changed_since=commit, selection=lane)
