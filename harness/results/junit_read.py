"""Read JUnit XML from any producer into one normalised shape, streaming.

Producers disagree on almost everything: pytest (xunit1 with per-case properties,
xunit2 without: ``harness run`` writes xunit2 and keeps a case's node id and properties
in the sidecar beside it, joined here, see ``sidecar``), Jenkins-style classname +
name, nested ``<testsuites>``, Maven surefire's ``<flakyFailure>`` /
``<rerunFailure>``, pytest-rerunfailures (rerun elements, or one ``<testcase>`` per
attempt), gtest (``status`` / ``result`` attributes) and ctest (``status="fail"`` /
``"notrun"``). The history store needs one shape, and must read a million cases
quickly, so this drives expat directly (the callbacks are in ``junit_expat``) and keeps
no element objects: a case is built when its ``</testcase>`` closes and handed out once
it leaves a window of recent cases (where rerun attempts are merged) or its suite
closes. ``JunitReader.batches`` hands them on as plain tuples (what the history ingest
reads); iterating gives ``Case`` objects. A truncated file keeps every case before the
damage and reports one line naming the file and the parser's line:column.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.parsers import expat

from harness.results.junit_expat import NODEID_PROPERTY, Callbacks, Fields, Suite
from harness.results.outcome import STATUSES
from harness.results.sidecar import open_sidecar
from harness.results.testids import case_ids
from harness.results.xml_clean import XmlCleaner

__all__ = [
    "COLUMN_PROPERTIES", "NODEID_PROPERTY", "STATUSES", "Case", "Fields", "JunitReader",
    "Suite", "case_ids", "read_junit", "suite_properties",
]  # fmt: skip

# The properties the report reads get their own columns; the rest stay as text.
COLUMN_PROPERTIES = (
    "provider",
    "op",
    "dtype",
    "max_abs_err",
    "max_rel_err",
    "atol",
    "rtol",
    "headroom",
    "requires",
)
_BLOCK = 1 << 20
# Attempts of one test (one <testcase> each) are merged while they are this close; the
# cases before stream on, so a testsuite of a million cases holds a window, not all.
_RERUN_WINDOW = 4096

Warn = Callable[[str], None]


@dataclass(slots=True)
class Case:
    suite: str
    nodeid: str  # pytest's node id as the plugin recorded it (else rebuilt, normalised)
    key: str  # the normalised id without device parts: one test on every platform
    params: str
    status: str
    duration: float
    message: str
    reruns: int  # failed attempts before the final one
    properties: dict[str, str]


def _case(fields: Fields) -> Case:
    suite, nodeid, key, params, status, duration, message, reruns, props = fields
    return Case(suite, nodeid, key, params, status, duration, message, reruns, props or {})


class JunitReader:
    """Stream the cases of one file; ``suites`` fills in as their elements close."""

    def __init__(self, path: Path, warn: Warn, *, sidecar: bool = True) -> None:
        self.path = path
        self.warn = warn
        self.sidecar = sidecar  # join the partial file beside it (node ids, properties)
        self.suites: dict[str, Suite] = {}
        self.truncated = False

    def __iter__(self) -> Iterator[Case]:
        for batch in self.batches():
            yield from map(_case, batch)

    def batches(self) -> Iterator[list[Fields]]:
        """The cases as tuples (:data:`Fields`), in order, a list per block read; each
        list is handed over (the reader keeps no reference to it)."""
        # The cleaner hands expat UTF-8 whatever the file declares (it decodes as UTF-8).
        parser = expat.ParserCreate("UTF-8")
        parser.buffer_text = True
        state = Callbacks(self.suites, self.path.stem, parser, _RERUN_WINDOW)
        cleaner = XmlCleaner()
        side = open_sidecar(self.path) if self.sidecar else None
        if side is not None:
            state.find = side.find
        try:
            with self.path.open("rb") as handle:
                while True:
                    block = handle.read(_BLOCK)
                    parser.Parse(cleaner.feed(block, final=not block), not block)
                    if ready := state.take():
                        yield ready
                    if not block:
                        break
        except expat.ExpatError as error:
            self.truncated = True
            self.warn(
                f"{self.path}:{error.lineno}:{error.offset}: malformed or truncated JUnit "
                f"({expat.ErrorString(error.code)}); kept the test cases before it"
            )
        except OSError as error:
            self.truncated = True
            self.warn(f"{self.path}: cannot read JUnit ({error.strerror or error})")
        finally:
            if side is not None:
                side.close()
        if note := cleaner.replaced_note(self.path):
            self.warn(note)
        if state.bad_times:
            self.warn(f"{self.path}: {state.bad_times} test case time(s) negative or not "
                      "finite; stored as 0")
        if rest := state.rest():
            yield rest


def suite_properties(path: Path, warn: Warn) -> dict[str, str] | None:
    """The ``<testsuite>`` properties of one file, merged; None when it has no suite."""
    reader = JunitReader(path, warn, sidecar=False)  # the cases' own are not needed
    for _ in reader:  # suite properties are complete once their suite has closed
        pass
    if not reader.suites:
        return None
    merged: dict[str, str] = {}
    for suite in reader.suites.values():
        merged.update(suite.properties)
    return merged


def read_junit(path: Path, warn: Warn) -> tuple[list[Case], dict[str, Suite]]:
    """Read one file completely (small files, tests and tools)."""
    reader = JunitReader(path, warn)
    cases = list(reader)
    return cases, reader.suites
