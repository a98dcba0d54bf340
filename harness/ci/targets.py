"""Which matrices go into a pipeline, read from their ``ci:`` sections."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from harness.ci.pipeline import CiTarget
from harness.errors import UsageError
from harness.matrix import list_matrices, load_matrix


def targets_from_matrices(root: Path | None, wanted: Sequence[str] = (), *,
                          nightly: bool = False) -> list[CiTarget]:
    """Every concrete matrix (or the ``wanted`` ones, in that order) as CI targets.

    A nightly pipeline keeps the matrices with ``ci.nightly: true``; naming a matrix
    explicitly overrides that, since asking for it is the stronger statement.
    """
    available = list_matrices(root)
    for name in wanted:
        if name not in available:
            near = difflib.get_close_matches(name, available, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise UsageError(f"--matrices: no matrix {name!r}{hint}; "
                             f"known: {', '.join(available)}")
    targets = []
    for name in wanted or available:
        matrix = load_matrix(name, root)
        if nightly and not wanted and not matrix.ci.nightly:
            continue
        targets.append(CiTarget(matrix=matrix.name, queue=matrix.ci.queue,
                                shards=matrix.ci.shards,
                                timeout_minutes=matrix.ci.timeout_minutes,
                                nightly=matrix.ci.nightly))
    return targets
