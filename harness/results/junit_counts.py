"""Make every ``<testsuite>``'s counts say what it holds, as a strict reader counts them.

A reader such as junitparser or Jenkins' xunit plugin counts a suite's ``<testcase>``
elements and, per case, its first ``<failure>``, ``<error>`` or ``<skipped>`` child.
pytest's own counts can differ from that (a strict XPASS is a ``<failure>`` pytest
counts apart), and the runner adds cases to files pytest wrote; so the suites' count
attributes are recounted from the elements before a file is kept or merged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from xml.parsers import expat
from xml.sax.saxutils import quoteattr

_RESULTS = ("failure", "error", "skipped")
_KINDS = {"failure": "failures", "error": "errors", "skipped": "skipped"}
# A start tag from its '<': quoted attribute values may hold '>'.
_START_TAG = re.compile(rb"<[^\s/>]+(?:\s+[^\s=/>]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*\s*/?>")


@dataclass
class JUnitTotals:
    """The counts a <testsuite> element carries (tests, failures, errors, skipped, time),
    as JUnit readers sum them; not the outcome counts of results/outcome.py."""

    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    time: float = 0.0

    def add(self, other: JUnitTotals) -> None:
        self.tests += other.tests
        self.failures += other.failures
        self.errors += other.errors
        self.skipped += other.skipped
        self.time += other.time


class _Counter:
    def __init__(self, parser: expat.XMLParserType) -> None:
        self.parser = parser
        self.depth = 0
        self.open: list[tuple[int, dict[str, str], JUnitTotals]] = []  # suites open now
        self.closed: list[tuple[int, dict[str, str], JUnitTotals]] = []
        self.top = JUnitTotals()  # the suites outside any other suite, summed
        self.case_depth = -1  # depth of the open <testcase>, -1 outside one
        self.result: str | None = None
        parser.StartElementHandler = self.start
        parser.EndElementHandler = self.end

    def start(self, name: str, attrs: dict[str, str]) -> None:
        self.depth += 1
        if name == "testsuite":
            self.open.append((self.parser.CurrentByteIndex, attrs, JUnitTotals()))
        elif name == "testcase" and self.case_depth < 0:
            self.case_depth, self.result = self.depth, None
        elif self.depth == self.case_depth + 1 and name in _RESULTS and self.result is None:
            self.result = name

    def end(self, name: str) -> None:
        if self.depth == self.case_depth:
            self.case_depth = -1
            for _, _, counts in self.open:  # a nested suite's cases count in its parents
                counts.tests += 1
                if self.result is not None:
                    kind = _KINDS[self.result]
                    setattr(counts, kind, getattr(counts, kind) + 1)
        elif name == "testsuite" and self.open:
            suite = self.open.pop()
            self.closed.append(suite)
            if not self.open:
                suite[2].time = _seconds(suite[1].get("time"))
                self.top.add(suite[2])
        self.depth -= 1


def _seconds(text: str | None) -> float:
    try:
        value = float(text or 0)
    except ValueError:
        return 0.0
    return value if value >= 0 else 0.0


def _tag(attrs: dict[str, str], counts: JUnitTotals) -> bytes:
    values = dict(attrs)
    values.setdefault("name", "")
    values.update(tests=str(counts.tests), failures=str(counts.failures),
                  errors=str(counts.errors), skipped=str(counts.skipped))
    text = " ".join(f"{key}={quoteattr(value)}" for key, value in values.items())
    return f"<testsuite {text}>".encode()


def recount(data: bytes) -> tuple[bytes, JUnitTotals]:
    """``data`` (well-formed UTF-8 JUnit) with each suite's counts made true, and the
    totals of its outermost suites. Raises ``expat.ExpatError`` on malformed XML."""
    parser = expat.ParserCreate("UTF-8")
    counter = _Counter(parser)
    parser.Parse(data, True)
    out = bytearray(data)
    for at, attrs, counts in sorted(counter.closed, key=lambda suite: -suite[0]):
        found = _START_TAG.match(data, at)
        if found is None:  # expat read a start tag there: cannot happen
            continue
        tag = _tag(attrs, counts)
        out[at:found.end()] = tag[:-1] + b"/>" if found.group().endswith(b"/>") else tag
    return bytes(out), counter.top
