"""The expat callbacks behind ``junit_read``: a file's test cases as plain tuples.

A million cases must parse in seconds, so the callbacks keep no element objects and
do as little as they can per element: three modes swap the parser's handlers (outside
any test case, inside a ``<testcase>``, inside a ``<properties>``), text is collected
only where it is read, and a finished case is one tuple (:data:`Fields`). Attempts of
one test written as separate ``<testcase>`` elements are merged in a window of recent
cases; the cases before it are handed on in order (``ready``).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast
from xml.parsers import expat

from harness.results.case_meaning import NEW_FAILURES
from harness.results.testids import case_ids, recorded_ids

NODEID_PROPERTY = "nodeid"  # the plugin records pytest's node id under this name
_RERUN_TAGS = frozenset({"rerunFailure", "rerunError", "flakyFailure", "flakyError", "rerun"})
_STATUS_TAGS = frozenset({"failure", "error", "skipped"}) | _RERUN_TAGS
_MESSAGE_LIMIT = 2000
_FLUSH = 1024  # cases handed on at once when the window is full
_INF = math.inf

# One finished case: (suite, nodeid, key, params, status, duration, message, reruns,
# properties or None), the order of ``junit_read.Case``'s fields.
Fields = tuple[str, str, str, str, str, float, str, int, "dict[str, str] | None"]


@dataclass(slots=True)
class Suite:
    name: str
    tests: int = 0
    time: float = 0.0
    timestamp: str = ""
    hostname: str = ""
    properties: dict[str, str] = field(default_factory=dict)


def _message(attrs: dict[str, str], text: str) -> str:
    message = attrs.get("message") or text.strip().split("\n", 1)[0]
    if message == COLLECTION_SKIP:
        message = collection_skip_reason(message, text) or message
    return message[:_MESSAGE_LIMIT]


# (tag, attributes, text before its first child) of one status element of a testcase.
_Child = tuple[str, dict[str, str], str]
_Start = Callable[[str, dict[str, str]], None]
_End = Callable[[str], None]
_Mode = tuple[_Start, _End]


def case_status(attrs: dict[str, str], children: list[_Child]) -> tuple[str, str, int]:
    """(status, message, failed attempts before the last) of one ``<testcase>``."""
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


class Callbacks:
    """expat callbacks for one file: no element objects, only the state a case needs.

    ``ready`` collects finished cases in order; the reader takes them after each
    block it feeds. ``suites`` fills in as their elements open and close.
    """

    def __init__(
        self, suites: dict[str, Suite], stem: str, parser: expat.XMLParserType, window: int
    ) -> None:
        self.suites = suites
        self.stem = stem  # the suite of cases outside any <testsuite>: the file's name
        self.parser = parser
        self.window = window + _FLUSH
        self.tags: list[str] = []  # open elements outside test cases
        self.suite_names: list[str] = []
        self.suite_attrs: list[dict[str, str]] = []
        self.pending: dict[tuple[str, str], Fields] = {}
        self.ready: list[Fields] = []
        self.case: dict[str, str] = {}
        self.level = 0  # open elements inside the current test case
        self.children: list[_Child] = []
        self.case_props: dict[str, str] | None = None
        self.props: dict[str, str] = {}  # the properties being read
        self.bad_times = 0  # case times clamped to 0 (negative, infinite, NaN)
        # (classname, name) -> (node id, properties) from the JUnit file's sidecar
        self.find: Callable[[str, str], tuple[str, dict[str, str]] | None] | None = None
        self.plevel = 0  # open elements inside the current <properties>
        self.text: list[str] | None = None
        self.text_for: str | None = None  # property name when collecting its text
        # Bound once: a swap per element is then two attribute stores.
        self.outside: _Mode = (self.start, self.end)
        self.in_case: _Mode = (self.case_start, self.case_end)
        self.in_props: _Mode = (self.prop_start, self.prop_end)
        self.resume: _Mode = self.outside
        # A test case's <properties> is read in a quicker mode (see ``fast_prop``).
        self.ends: list[str] = []
        self.fast_props: _Mode = (self.fast_prop, self.ends.append)
        self.opened = 0  # <property> elements opened in that mode
        self.quick = False  # in that mode
        parser.StartElementHandler, parser.EndElementHandler = self.outside

    def _enter_props(self, into: dict[str, str], resume: _Mode) -> None:
        self.props = into
        self.plevel = 0
        self.resume = resume
        self.parser.StartElementHandler, self.parser.EndElementHandler = self.in_props

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if name == "testcase":  # not pushed on ``tags``: case_end leaves it off too
            self.case = attrs
            self.level = 0
            self.children = []
            self.case_props = None
            self.parser.StartElementHandler, self.parser.EndElementHandler = self.in_case
            return
        tags = self.tags
        tags.append(name)
        if name == "testsuite":
            suite = attrs.get("name") or self.stem
            self.suite_names.append(suite)
            self.suite_attrs.append(attrs)
            self.suites.setdefault(suite, Suite(name=suite))
        elif name == "properties" and len(tags) > 1 and tags[-2] == "testsuite":
            suite_props = self.suites[self.suite_names[-1]].properties
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
                if attrs.get("message", "") in ("", COLLECTION_SKIP):
                    self._begin_text(None)  # the message, or the reason pytest put there
            elif name == "properties" and self.case_props is None:
                self.case_props = self.props = {}
                self.opened = 0
                self.ends.clear()
                self.quick = True
                self.parser.StartElementHandler, self.parser.EndElementHandler = self.fast_props

    def case_end(self, name: str) -> None:
        if self.text is not None:
            self._end_text()
        if self.level:
            self.level -= 1
            return
        self.parser.StartElementHandler, self.parser.EndElementHandler = self.outside
        self._add(self.case)

    def fast_prop(self, name: str, attrs: dict[str, str]) -> None:
        """A start tag inside a test case's ``<properties>``, where end tags only go on
        a list (a C call, not a Python one: a parity case has a dozen of them).

        While every ``<property>`` so far has closed and this is another one, the
        properties go on; anything else (an end tag past them, an element inside one,
        a property with its value as text) leaves for the general mode, replaying the
        end tags collected so far.
        """
        if len(self.ends) == self.opened and name == "property":
            self.opened += 1
            pname = attrs.get("name")
            if pname:
                value = attrs.get("value")
                if value is not None:
                    self.props[pname] = value
                    return
                self._general_props()
                self._begin_text(pname)
            return
        ends = self.ends
        if len(ends) == self.opened + 2 and ends[-1] == "testcase" and ends[-2] == "properties":
            # The usual way out: </properties></testcase> and the next case's start tag.
            ends.clear()
            self.quick = False
            self.level = 0
            self.parser.StartElementHandler, self.parser.EndElementHandler = self.outside
            self._add(self.case)
            self.start(name, attrs)
            return
        self._general_props()
        cast(_Start, self.parser.StartElementHandler)(name, attrs)  # in the mode it is now

    def _general_props(self) -> None:
        """Leave the quick mode for the general one: replay its end tags in order."""
        ends = self.ends
        # Each <property> but the last closed before the next opened: the last is still
        # open (one element open inside <properties>), or the tags after its end tag
        # are what happened since.
        open_now = self.opened - len(ends)
        tail = ends[self.opened :] if open_now <= 0 else []
        ends.clear()
        self.quick = False
        self.plevel = max(open_now, 0)
        self.resume = self.in_case
        self.parser.StartElementHandler, self.parser.EndElementHandler = self.in_props
        for name in tail:
            end = self.parser.EndElementHandler  # the mode changes as they close
            if end is not None:
                end(name)

    def sync(self) -> None:
        """After a block: what the quick mode left on its list happens now."""
        if self.quick and len(self.ends) > self.opened:
            self._general_props()

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
        get = attrs.get
        classname = get("classname", "")
        name = get("name", "")
        if self.children or "status" in attrs or "result" in attrs:
            status, message, reruns = case_status(attrs, self.children)
        else:
            status, message, reruns = "passed", "", 0
        props = self.case_props
        recorded = props.get(NODEID_PROPERTY) if props else None
        if props is None and self.find is not None:
            # xunit2: the node id and the properties are in the sidecar (results/sidecar)
            found = self.find(classname, name)
            if found is not None:
                recorded, props = found
        # pytest's own id when the plugin recorded it, else rebuilt from the attributes.
        nodeid, key, params = (
            recorded_ids(recorded) if recorded else case_ids(classname, name, get("file", ""))
        )
        time = get("time")
        try:
            duration = float(time) if time else 0.0
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
            failed = earlier[4] in NEW_FAILURES
            reruns += earlier[7] + failed
            duration += earlier[5]
            if not message and failed:
                message = earlier[6]
        pending[raw] = (suite, nodeid, key, params, status, duration, message, reruns, props)
        if len(pending) > self.window:  # memory per case, not per testsuite
            # The oldest go on, a batch at a time (popping a dict's first item one by one
            # rescans the holes left in front of it).
            oldest = list(itertools.islice(pending, _FLUSH))
            self.ready.extend(pending.pop(raw) for raw in oldest)

    def _outside_suites(self) -> str:
        suite = self.stem
        if suite not in self.suites:
            self.suites[suite] = Suite(name=suite)
        return suite

    def _close_suite(self, name: str) -> None:
        # expat hands the end tag no attributes: use the ones saved at its start.
        suite = self.suites[name]
        attrs = self.suite_attrs.pop()
        suite.timestamp = attrs.get("timestamp", suite.timestamp)
        suite.hostname = attrs.get("hostname", suite.hostname)
        try:
            suite.tests = int(attrs.get("tests") or 0)
            suite.time = float(attrs.get("time") or 0.0)
        except ValueError:
            pass

    def take(self) -> list[Fields]:
        """The cases finished so far, in order; they are handed over once."""
        self.sync()
        ready, self.ready = self.ready, []
        return ready

    def rest(self) -> list[Fields]:
        """At the end of the file: every case not yet handed over."""
        rest = self.take()
        rest.extend(self.pending.values())
        self.pending.clear()
        return rest


# pytest's JUnit for a file skipped whole while it was collected: the message says only
# that; the reason is in the text, the collect report's (path, line, "Skipped: why") tuple.
COLLECTION_SKIP = "collection skipped"
_COLLECTED_WHY = re.compile(r"""Skipped: (.*?)['"]\)\s*\Z""", re.DOTALL)


def collection_skip_reason(message: str, text: str) -> str | None:
    """The reason of a file skipped at collection, or None for any other message."""
    if message.strip() != COLLECTION_SKIP:
        return None
    found = _COLLECTED_WHY.search(text or "")
    return found[1].splitlines()[0] if found and found[1].strip() else None
