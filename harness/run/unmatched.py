"""known_failures entries that matched no test of a suite collected in full.

An id written against another rootdir (``test/unittests/test_x.py::...`` where pytest
reports ``test_x.py::...``) silently stops matching: the test fails instead of being an
expected failure. After a run the harness lists, per suite and its rootdir, each entry
that names one of the suite's files (by path, or by file name for another rootdir) yet
matched none of its tests, using the plugin's own matcher on the node ids pytest
reported (the partial results file).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.matrix.known_failures import entries_for, glob_to_regex, match
from harness.matrix.model import Matrix
from harness.platform.host import kernel_cpu_flags
from harness.results.junit_write import read_partial
from harness.runners.invocation import Invocation


@dataclass(frozen=True, kw_only=True)
class Unmatched:
    suite: str
    rootdir: str
    id: str
    where: str

    def as_dict(self) -> dict[str, str]:
        return {"suite": self.suite, "rootdir": self.rootdir, "id": self.id, "where": self.where}


def unmatched_known_failures(
    matrix: Matrix, invocations: Sequence[Invocation], *, emulate: bool, full: set[str],
    cpu_flags: frozenset[str],
) -> list[Unmatched]:
    """``full``: the suites collected in full (no -k, -m, shard, tier or node-id choice);
    ``cpu_flags``: the CPU the suites saw (the run record's host: the lane's emulated CPU
    where it has one)."""
    out: list[Unmatched] = []
    for inv in invocations:
        if inv.suite not in full:
            continue
        ids = [str(r["nodeid"]) for r in read_partial(inv.partial) if "nodeid" in r]
        if not ids:
            continue
        # as the suites saw the CPU (the matrix's runtime.env may cap oneDNN's ISA)
        flags = kernel_cpu_flags(cpu_flags, {**os.environ, **matrix.runtime.env})
        entries = entries_for(matrix, emulate=emulate, host_flags=flags)
        for nid in ids:
            match(entries, nid)
        files = {nid.partition("::")[0] for nid in ids}
        names = {Path(f).name for f in files}
        for entry in entries:
            if entry.matched:
                continue
            by_path = glob_to_regex(entry.file_part)
            by_name = glob_to_regex(entry.file_part.rpartition("/")[2])
            if any(by_path.match(f) for f in files) or any(by_name.match(n) for n in names):
                rootdir = str(inv.rootdir)
                out.append(
                    Unmatched(suite=inv.suite, rootdir=rootdir, id=entry.pattern, where=entry.where)
                )
    return out
