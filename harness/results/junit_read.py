"""Read JUnit XML from any producer into one normalised shape, streaming.

Producers disagree on almost everything: pytest (xunit1 with per-case properties,
xunit2 without), Jenkins-style classname + name, nested ``<testsuites>``, Maven
surefire's ``<flakyFailure>`` / ``<rerunFailure>``, pytest-rerunfailures (rerun
elements, or one ``<testcase>`` per attempt), gtest (``status`` / ``result``
attributes) and ctest (``status="fail"`` / ``"notrun"``). The history store needs one
shape, and must read a million cases quickly, so this drives expat directly and keeps
no element objects: a case is built when its ``</testcase>`` closes and handed out
once it leaves a window of recent cases (where rerun attempts are merged) or its suite
closes. A truncated file keeps every case before the damage and
reports one line naming the file and the parser's line:column.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers import expat

from harness.results.testids import case_ids, recorded_ids
from harness.results.xml_clean import XmlCleaner

NODEID_PROPERTY = "nodeid"  # the plugin records pytest's node id under this name
STATUSES = ("passed", "failed", "error", "skipped", "xfail", "xpass")

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
_RERUN_TAGS = frozenset({"rerunFailure", "rerunError", "flakyFailure", "flakyError", "rerun"})
_MESSAGE_LIMIT = 2000

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


@dataclass(slots=True)
class Suite:
    name: str
    tests: int = 0
    time: float = 0.0
    timestamp: str = ""
    hostname: str = ""
    properties: dict[str, str] = field(default_factory=dict)


_STATUS_TAGS = frozenset({"failure", "error", "skipped"}) | _RERUN_TAGS
_BLOCK = 1 << 20
# Attempts of one test (one <testcase> each) are merged while they are this close; the
# cases before stream on, so a testsuite of a million cases holds a window, not all.
_RERUN_WINDOW = 4096
_FLUSH = 1024  # cases handed on at once when the window is full
_INF = math.inf


def _message(attrs: dict[str, str], text: str) -> str:
    message = attrs.get("message") or text.strip().split("\n", 1)[0]
    return message[:_MESSAGE_LIMIT]


# (tag, attributes, text before its first child) of one status element of a testcase.
_Child = tuple[str, dict[str, str], str]
_Start = Callable[[str, dict[str, str]], None]
_End = Callable[[str], None]
_Mode = tuple[_Start, _End]


def _case_status(attrs: dict[str, str], children: list[_Child]) -> tuple[str, str, int]:
    status, message, reruns = "passed", "", 0
    for tag, child, text in children:
        if tag == "failure":
            message = _message(child, text)
            status = "xpass" if message.startswith("[XPASS(strict)]") else "failed"
        elif tag == "error":
            if status != "failed":
                status, message = "error", _message(child, text)
        elif tag == "skipped":
            if status == "passed":
                message = _message(child, text)
                xfail = child.get("type") == "pytest.xfail" or message == "expected test failure"
                status = "xfail" if xfail else "skipped"
        else:  # a rerun / flaky attempt
            reruns += 1
            if not message:
                message = _message(child, text)
    if status == "passed":
        # gtest marks skips with attributes only; ctest says "fail" / "notrun".
        run_status = attrs.get("status", "")
        result = attrs.get("result", "")
        if result in ("skipped", "suppressed") or run_status in ("notrun", "disabled"):
            status = "skipped"
        elif run_status == "fail":
            status = "failed"
    return status, message, reruns


class _Parse:
    """expat callbacks for one file: no element objects, only the state a case needs.

    Three modes swap the parser's handlers: outside any test case (keeps the tag
    stack), inside a ``<testcase>`` and inside a ``<properties>``, so the many small
    elements of a big file each cost a few operations. Text is collected only where it
    is read (a status element without ``message``, a property without ``value``).
    """

    def __init__(self, reader: JunitReader, parser: expat.XMLParserType) -> None:
        self.reader = reader
        self.parser = parser
        self.tags: list[str] = []  # open elements outside test cases
        self.suite_names: list[str] = []
        self.suite_attrs: list[dict[str, str]] = []
        self.pending: dict[tuple[str, str], Case] = {}
        self.ready: list[Case] = []
        self.case: dict[str, str] = {}
        self.level = 0  # open elements inside the current test case
        self.children: list[_Child] = []
        self.case_props: dict[str, str] | None = None
        self.props: dict[str, str] = {}  # the properties being read
        self.bad_times = 0  # case times clamped to 0 (negative, infinite, NaN)
        self.plevel = 0  # open elements inside the current <properties>
        self.text: list[str] | None = None
        self.text_for: str | None = None  # property name when collecting its text
        # Bound once: a swap per element is then two attribute stores.
        self.outside: _Mode = (self.start, self.end)
        self.in_case: _Mode = (self.case_start, self.case_end)
        self.in_props: _Mode = (self.prop_start, self.prop_end)
        self.resume: _Mode = self.outside
        parser.StartElementHandler, parser.EndElementHandler = self.outside

    def _enter_props(self, into: dict[str, str], resume: _Mode) -> None:
        self.props = into
        self.plevel = 0
        self.resume = resume
        self.parser.StartElementHandler, self.parser.EndElementHandler = self.in_props

    def start(self, name: str, attrs: dict[str, str]) -> None:
        tags = self.tags
        tags.append(name)
        if name == "testcase":
            self.case = attrs
            self.level = 0
            self.children = []
            self.case_props = None
            self.parser.StartElementHandler, self.parser.EndElementHandler = self.in_case
        elif name == "testsuite":
            suite = attrs.get("name") or self.reader.path.stem
            self.suite_names.append(suite)
            self.suite_attrs.append(attrs)
            self.reader.suites.setdefault(suite, Suite(name=suite))
        elif name == "properties" and len(tags) > 1 and tags[-2] == "testsuite":
            suite_props = self.reader.suites[self.suite_names[-1]].properties
            self._enter_props(suite_props, self.outside)

    def end(self, name: str) -> None:
        self.tags.pop()
        if name == "testsuite":
            self._close_suite(self.suite_names.pop())
            self.ready.extend(self.pending.values())
            self.pending.clear()

    def case_start(self, name: str, attrs: dict[str, str]) -> None:
        if self.text is not None:
            self._end_text()  # element.text ends at the first child
        self.level += 1
        if self.level == 1:
            if name in _STATUS_TAGS:
                self.children.append((name, attrs, ""))
                if not attrs.get("message"):
                    self._begin_text(None)
            elif name == "properties" and self.case_props is None:
                self.case_props = {}
                self._enter_props(self.case_props, self.in_case)

    def case_end(self, name: str) -> None:
        if self.text is not None:
            self._end_text()
        if self.level:
            self.level -= 1
            return
        self.tags.pop()
        self.parser.StartElementHandler, self.parser.EndElementHandler = self.outside
        self._add(self.case)

    def prop_start(self, name: str, attrs: dict[str, str]) -> None:
        if self.text is not None:
            self._end_text()
        self.plevel += 1
        if name == "property":
            pname = attrs.get("name")
            if pname:
                value = attrs.get("value")
                if value is None:
                    self._begin_text(pname)
                else:
                    self.props[pname] = value

    def prop_end(self, name: str) -> None:
        if self.text is not None:
            self._end_text()
        if self.plevel:
            self.plevel -= 1
            return
        parser = self.parser
        parser.StartElementHandler, parser.EndElementHandler = self.resume
        self.resume[1](name)  # the <properties> element closes in the mode around it

    def _begin_text(self, prop: str | None) -> None:
        self.text = []
        self.text_for = prop
        self.parser.CharacterDataHandler = self.text.append

    def _end_text(self) -> None:
        text = "".join(self.text or ())
        self.parser.CharacterDataHandler = None
        self.text = None
        if self.text_for is not None:
            self.props[self.text_for] = text
            self.text_for = None
        elif self.children:
            tag, attrs, _ = self.children[-1]
            self.children[-1] = (tag, attrs, text)

    def _add(self, attrs: dict[str, str]) -> None:
        classname = attrs.get("classname", "")
        name = attrs.get("name", "")
        if self.children:
            status, message, reruns = _case_status(attrs, self.children)
        elif "status" in attrs or "result" in attrs:
            status, message, reruns = _case_status(attrs, [])
        else:
            status, message, reruns = "passed", "", 0
        props = self.case_props if self.case_props is not None else {}
        recorded = props.get(NODEID_PROPERTY)
        # pytest's own id when the plugin recorded it, else rebuilt from the attributes.
        nodeid, key, params = (
            recorded_ids(recorded)
            if recorded
            else case_ids(classname, name, attrs.get("file", ""))
        )
        try:
            duration = float(attrs.get("time") or 0.0)
        except ValueError:
            duration = 0.0
        if not 0.0 <= duration < _INF:  # negative, infinite or NaN: JSON cannot hold it
            self.bad_times += 1
            duration = 0.0
        suite = self.suite_names[-1] if self.suite_names else self._outside_suites()
        raw = (classname, name)
        pending = self.pending
        earlier = pending.pop(raw, None)
        if earlier is not None:
            # One <testcase> per attempt (pytest-rerunfailures >= 16.6.1): last one wins.
            reruns += earlier.reruns + (earlier.status in ("failed", "error"))
            duration += earlier.duration
            if not message and earlier.status in ("failed", "error"):
                message = earlier.message
        pending[raw] = Case(suite, nodeid, key, params, status, duration, message, reruns, props)
        if len(pending) > _RERUN_WINDOW + _FLUSH:  # memory per case, not per testsuite
            # The oldest go on, a batch at a time (popping a dict's first item one by one
            # rescans the holes left in front of it).
            oldest = list(itertools.islice(pending, _FLUSH))
            self.ready.extend(pending.pop(raw) for raw in oldest)

    def _outside_suites(self) -> str:
        """The suite of a test case outside any <testsuite>: the file's name."""
        suite = self.reader.path.stem
        if suite not in self.reader.suites:
            self.reader.suites[suite] = Suite(name=suite)
        return suite

    def _close_suite(self, name: str) -> None:
        # expat hands the end tag no attributes: use the ones saved at its start.
        suite = self.reader.suites[name]
        attrs = self.suite_attrs.pop()
        suite.timestamp = attrs.get("timestamp", suite.timestamp)
        suite.hostname = attrs.get("hostname", suite.hostname)
        try:
            suite.tests = int(attrs.get("tests") or 0)
            suite.time = float(attrs.get("time") or 0.0)
        except ValueError:
            pass


class JunitReader:
    """Stream the cases of one file; ``suites`` fills in as their elements close."""

    def __init__(self, path: Path, warn: Warn) -> None:
        self.path = path
        self.warn = warn
        self.suites: dict[str, Suite] = {}
        self.truncated = False

    def __iter__(self) -> Iterator[Case]:
        # The cleaner hands expat UTF-8 whatever the file declares (it decodes as UTF-8).
        parser = expat.ParserCreate("UTF-8")
        parser.buffer_text = True
        state = _Parse(self, parser)
        cleaner = XmlCleaner()
        try:
            with self.path.open("rb") as handle:
                while True:
                    block = handle.read(_BLOCK)
                    parser.Parse(cleaner.feed(block, final=not block), not block)
                    if state.ready:
                        yield from state.ready
                        state.ready.clear()
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
        if cleaner.replaced:
            self.warn(f"{self.path}: {cleaner.replaced} character(s) that are not valid XML "
                      "or UTF-8 replaced with U+FFFD")
        if state.bad_times:
            self.warn(f"{self.path}: {state.bad_times} test case time(s) negative or not "
                      "finite; stored as 0")
        yield from state.ready
        yield from state.pending.values()


def suite_properties(path: Path, warn: Warn) -> dict[str, str] | None:
    """The ``<testsuite>`` properties of one file, merged; None when it has no suite."""
    reader = JunitReader(path, warn)
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
