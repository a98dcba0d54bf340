"""The one reader of a run folder, trusted or not: its record and each test case's outcome,
failure signature (the exception's type and first line, numbers masked) and headroom.
``harness report compare`` (the two runs it compares), bisect (each step's verdict on the
test) and repro (whether the run recorded a case) all read a run's cases through it.

A run folder may be a CI artifact anyone could have edited: only its manifest (through the
checked reader, one line naming the bad field) and the JUnit files and sidecars under its
own ``junit/`` folder are read, nothing that resolves outside the folder (a symlink out is
a warning line and left out), nothing in it is run, and its text is escaped where it is
shown (reports/compare_render.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import UsageError
from harness.results import layout, speed
from harness.results.case_meaning import KNOWN, WORKS
from harness.results.fingerprint import mask
from harness.results.junit_read import JunitReader
from harness.results.manifest import RunRecord
from harness.results.sidecar import iter_records

Warn = Callable[[str], None]
_WHERE = re.compile(r"^\S.*:\d+: \S+$")  # pytest's last line: path:line: ExceptionType


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    """One test of a run: its outcome (``outcome.STATUSES``), the one-line message, the
    failure signature (empty for a pass), and every headroom it recorded."""

    suite: str
    nodeid: str
    status: str
    message: str
    signature: str = ""
    headroom: dict[str, float] = field(default_factory=dict)
    known: bool = False  # a known failure applied (xfail, xpass, or the entry's skip)
    # the speed tier's ratio (engine over baseline, plugin/speed.py), or why none was recorded
    speed: float | None = None
    speed_skipped: str = ""


@dataclass(frozen=True, kw_only=True)
class RunFolder:
    path: Path
    record: RunRecord
    cases: dict[str, CaseResult]  # by "<suite>::<node id>"
    junit: tuple[Path, ...] = ()  # the JUnit files read (inside the folder)

    def find(self, test: str) -> list[CaseResult]:
        """The cases whose node id is ``test`` or ends with it after ``::`` (a test's name
        alone, or a node id under any suite's rootdir)."""
        return [c for key, c in self.cases.items()
                if c.nodeid == test or key.endswith(f"::{test}")]


def raised(details: str) -> str:
    """The exception line of a report's tail (``E   Type: message`` before pytest's closing
    ``path:line: Type``); '' where the tail shows none."""
    lines = details.splitlines()
    end = next((i for i in range(len(lines) - 1, -1, -1) if _WHERE.match(lines[i])), len(lines))
    first = ""
    for line in reversed(lines[:end]):
        if line.startswith("E "):
            first = line[1:].strip()
        elif first:
            break  # the block's first line: the exception's own
    return first


def signature(status: str, message: str, details: str = "") -> str:
    """What identifies a failure across runs: the exception and its first line (an xfail's
    from the report's tail, its message being the known failure's reason), a skip's reason;
    numbers masked. Empty for a test that passed."""
    if status in WORKS:
        return ""
    text = (raised(details) or message) if status == "xfail" else message
    stripped = text.strip()
    return mask(stripped.splitlines()[0]) if stripped else status


def _headroom(properties: dict[str, str]) -> dict[str, float]:
    """``headroom`` and every ``*.headroom`` (the fusion suite's per output) as numbers."""
    found = {}
    for key, value in properties.items():
        if key == "headroom" or key.endswith(".headroom"):
            try:
                found[key] = float(value)
            except ValueError:
                continue
    return found


def _inside(path: Path, folder: Path, warn: Warn) -> bool:
    if path.resolve().is_relative_to(folder.resolve()):
        return True
    warn(f"{path}: resolves outside its run folder; left out")
    return False


def _details(partial: Path, wanted: set[str]) -> dict[str, str]:
    """The report tails of ``wanted`` node ids from a sidecar, read line by line."""
    if not wanted:
        return {}
    return {str(r["nodeid"]): details for r in iter_records(partial)
            if r["nodeid"] in wanted and isinstance(details := r.get("details"), str) and details}


def _suite_cases(junit: Path, warn: Warn) -> Iterator[CaseResult]:
    merged = junit.name == layout.MERGED  # a folder with no suite files: its testsuites
    suite, _ = layout.suite_of(junit)
    read = list(JunitReader(junit, warn))
    xfails = {c.nodeid for c in read if c.status == "xfail"}
    partial = layout.partial_for(junit)
    details = _details(partial, xfails) if partial.is_file() and _inside(
        partial, junit.parent, warn) else {}
    for case in read:
        props = case.properties
        yield CaseResult(
            suite=case.suite if merged else suite, nodeid=case.nodeid, status=case.status,
            message=case.message.strip().splitlines()[0] if case.message.strip() else "",
            signature=signature(case.status, case.message, details.get(case.nodeid, "")),
            headroom=_headroom(props),
            known=case.status in KNOWN or bool(props.get("known_failure")),
            speed=speed.ratio_of(props.get(speed.RATIO)),
            speed_skipped=props.get(speed.SKIPPED, ""),
        )


def read_run(path: Path, warn: Warn) -> RunFolder:
    """A run folder's record and cases; not a run folder is a UsageError (exit 2), a bad
    manifest a ConfigError naming the file and field (exit 2)."""
    if not path.is_dir():
        raise UsageError(f"{path}: no such run folder")
    if not (path / layout.MANIFEST).is_file():
        raise UsageError(f"{path}: not a run folder (no {layout.MANIFEST})")
    if not _inside(path / layout.MANIFEST, path, lambda _line: None):
        raise UsageError(f"{path}: its {layout.MANIFEST} resolves outside the folder; refused")
    record = RunRecord.read(path)
    cases: dict[str, CaseResult] = {}
    read: list[Path] = []
    for junit in layout.junit_files(path):
        if not _inside(junit, path, warn):
            continue
        read.append(junit)
        for case in _suite_cases(junit, warn):
            cases[f"{case.suite}::{case.nodeid}"] = case
    return RunFolder(path=path, record=record, cases=cases, junit=tuple(read))
