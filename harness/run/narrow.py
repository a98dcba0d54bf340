"""``harness run --changed-since REF``: narrow one run to what the change affects."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness.matrix.model import Matrix
from harness.run.request import RunRequest
from harness.select import select_changes
from harness.select.changes import merge_base


def narrow_request(request: RunRequest, root: Path, matrix: Matrix, ref: str) -> RunRequest | None:
    """The request narrowed to the lane's selection; None when nothing is affected."""
    commit = merge_base(root, ref)
    selection = select_changes(root, commit, matrices=[matrix.file])
    lane = next(iter(selection.lanes.values()))
    head = f"harness: --changed-since {ref} ({commit[:12]}): {len(selection.changed)} file(s)"
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
