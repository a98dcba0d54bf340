"""The files a suite keeps per lane beside its tests, and which lanes lack theirs.

A suite folder with a ``golden/`` folder (token ids, ``.json``: the e2e suite) or an
``expectations/`` folder (match counts, ``.yaml``: the fusion suite) reads one file per
lane from it (:func:`lane_file`). A lane without its file fails every test that reads it
(``no golden ids in ...``), so a lane shipped without one is red on every night it runs.
:func:`needs` finds them before that, for any matrix, from its data alone; a missing file
is accepted only where a known failure that applies to the lane expects that failure
(``raises: LaneDataMissing``: a GPU lane whose ids only its hardware can record).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.matrix.known_failures import entries_for
from harness.matrix.model import Matrix
from harness.matrix.suite_paths import suite_folder
from harness.roots import locate


class LaneDataMissing(AssertionError):
    """A test found no entry for itself in its lane's file. Raised only when that is all
    that failed, so a known failure expecting it (``raises: LaneDataMissing``: a GPU lane
    whose file only its hardware can record) never hides another failure."""


# kind -> (file suffix, the words the suite fails with when the lane's file lacks a case)
KINDS = {"golden": (".json", "no golden ids in"), "expectations": (".yaml", "no expectation in")}


def lane_file(folder: Path, kind: str, matrix: str, device: str, emulate: bool) -> Path:
    """The one rule for where a lane's file of ``kind`` lives in a suite folder: a GPU
    profile emulated on the CPU has a file of its own (other kernels, other ids); a CPU
    matrix run on another CPU (``--emulate`` off its named hardware) reads its own file,
    which says on which host it was recorded."""
    suffix = KINDS[kind][0]
    own = emulate and device != "cpu"
    return folder / kind / f"{matrix}{'-emulated' if own else ''}{suffix}"


@dataclass(frozen=True)
class Need:
    suite: str
    kind: str
    path: Path
    covered_by: str = ""  # the known failure that says why it is absent ("": none)

    def line(self, matrix: str, emulate: bool) -> str:
        lane = f"{matrix}{' (emulated)' if emulate else ''}"
        if self.covered_by:
            return f"{lane}: suite {self.suite}: no {self.path.name}, known: {self.covered_by}"
        how = " --emulate" if emulate else ""
        return (f"{lane}: suite {self.suite}: {self.path} is missing: record it with `harness "
                f"run --matrix {matrix}{how} --suite {self.suite} --update-expectations` on "
                "the lane's host and review it")


def needs(matrix: Matrix, *, emulate: bool, root: Path) -> list[Need]:
    """Each per-lane file the lane's suites read that is absent (known or not)."""
    entries = entries_for(matrix, emulate=emulate, host_flags=None)
    out = []
    for name, suite in matrix.suites.items():
        if not suite.enabled or suite.not_applicable:
            continue
        folder = suite_folder(suite.path, root)
        for kind in KINDS:
            if not (folder / kind).is_dir():
                continue
            path = lane_file(folder, kind, matrix.name, matrix.device, emulate)
            if path.is_file() and path.stat().st_size > 0:
                continue
            known = next((e for e in entries if _expects_missing(e.expect)
                          and _inside(e.file_part, folder, root)), None)
            out.append(Need(name, kind, path, known.describe() if known else ""))
    return out


def _expects_missing(expect: object) -> bool:
    return isinstance(expect, dict) and expect.get("raises") == LaneDataMissing.__name__


def _inside(test_file: str, folder: Path, root: Path) -> bool:
    """Whether a known failure's test file is in ``folder``, its path found as the suite's
    own is (suite_folder: the project, else the shipped root of an installed harness)."""
    return folder in locate(test_file, root).parents
