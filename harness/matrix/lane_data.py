"""The files a suite keeps per lane beside its tests, and which lanes lack theirs.

A suite folder with a ``golden/`` folder (token ids, ``.json``: the e2e suite) or an
``expectations/`` folder (match counts, ``.yaml``: the fusion suite) reads one file per
lane from it (:func:`lane_file`). A lane without its file fails every test that reads it
(``no golden ids in ...``), so a lane shipped without one is red on every night it runs.
:func:`needs` finds them before that, for any matrix, from its data alone; a missing file
is accepted only where a known failure that applies to the lane expects that failure
(``raises: LaneDataMissing``: a GPU lane whose ids only its hardware can record).

A matrix that extends a lane without changing what its data depends on (its engine, pins,
CPU: matrix/loader.py ``lane_data_chain``; an imported CI step, say) reads its parent's
files until it records its own (:func:`lane_files`). What a user's project records lives in
the project, never in an installed harness (:func:`recorded_in`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.matrix.known_failures import entries_for
from harness.matrix.model import Matrix
from harness.matrix.suite_paths import suite_folder
from harness.roots import locate, project_root, shipped_root


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
class LaneFiles:
    """A lane's file of one kind for one suite folder: the one its suite reads, and the
    lane's own, where ``--update-expectations`` records (the same where it has its own)."""

    read: Path
    own: Path


def lane_files(folder: Path, kind: str, matrix: Matrix, emulate: bool,
               root: Path | None = None) -> LaneFiles:
    """Read: the first file that exists of the lane's own, then each parent's it inherits
    (``Matrix.lane_data``), each in the project (``recorded_in``; ``root``: the project
    root, this process's by default) before the suite's own folder; else the lane's own.
    Own: the lane's file in the project."""
    mine = recorded_in(folder, root or project_root())
    own = lane_file(mine, kind, matrix.name, matrix.device, emulate)
    for lane in matrix.lane_data:
        for where in dict.fromkeys([mine, folder]):
            path = lane_file(where, kind, lane, matrix.device, emulate)
            if _nonempty(path):
                return LaneFiles(read=path, own=own)
    return LaneFiles(read=own, own=own)


def _nonempty(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


# Under a project's root: its per-lane files of the suites an installed harness ships
PROJECT_LANE_DATA = "lane-data"


def recorded_in(folder: Path, root: Path) -> Path:
    """Where a project records a suite folder's per-lane files: in the folder, unless an
    installed harness ships it (a shipped suite run in a user's project), which is never
    written into: then under the project's ``lane-data/``, at the folder's place (not the
    folder's own place under the root, where it would stand for the shipped suite)."""
    shipped = shipped_root().resolve()
    if root.resolve() == shipped:
        return folder
    try:
        return root / PROJECT_LANE_DATA / folder.resolve().relative_to(shipped)
    except ValueError:
        return folder


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
            files = lane_files(folder, kind, matrix, emulate, root)
            if _nonempty(files.read):
                continue
            path = files.own
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
