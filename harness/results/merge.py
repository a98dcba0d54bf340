"""merged.xml: every suite of a run in one file, for CI systems that read one.

Each suite file is checked with the one JUnit reader (an unreadable file is an
infrastructure error naming it), then its ``<testsuite>`` elements are copied through
as written, so nothing a CI system shows (system-out, suite properties) is lost, with
their counts made to match their cases (``junit_counts``); the root's ``tests``,
``failures`` and ``errors`` are the sums (junit-10.xsd allows no ``skipped`` there).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from xml.parsers import expat

from harness.errors import InfraError
from harness.results.junit_counts import JUnitTotals, recount
from harness.results.junit_write import count_junit
from harness.results.xml_clean import XmlCleaner

_PROLOGUE = re.compile(r"^\s*(<\?xml[^>]*\?>)?\s*(<testsuites\b[^>]*?(/?)>)?", re.DOTALL)


def _suites_of(text: str) -> str:
    """The ``<testsuite>`` elements of one file, without its prologue and wrapper."""
    head = _PROLOGUE.match(text)
    body = text[head.end():] if head else text
    if head and head.group(2):
        if head.group(3):  # <testsuites/>: nothing inside
            return ""
        body = body[: body.rfind("</testsuites>")]
    return body.strip()


def merge_junit(files: list[Path], out: Path) -> None:
    totals = JUnitTotals()
    parts: list[str] = []
    for path in sorted(files):
        problems: list[str] = []
        counts = count_junit(path, problems.append)
        if problems and not counts:
            raise InfraError(f"unreadable JUnit: {problems[0]}")
        for line in problems:  # characters replaced, bad times: the file still reads
            print(f"harness: warning: {line}", file=sys.stderr)
        # Copied through the same cleaner the reader uses: merged.xml is always valid XML.
        data = XmlCleaner().feed(path.read_bytes(), final=True)
        try:
            data, found = recount(data)
        except expat.ExpatError:  # truncated: the reader kept the cases before the damage
            found = JUnitTotals(tests=sum(counts.values()), errors=counts.get("error", 0),
                           failures=counts.get("failed", 0) + counts.get("xpassed", 0))
        totals.add(found)
        parts.append(_suites_of(data.decode()))
    attrs = (f'tests="{totals.tests}" failures="{totals.failures}" '
             f'errors="{totals.errors}" time="{totals.time:.3f}"')
    tmp = out.with_suffix(".xml.tmp")
    tmp.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n'
        f'<testsuites name="harness" {attrs}>\n' + "\n".join(p for p in parts if p)
        + "\n</testsuites>\n",
        encoding="utf-8",
    )
    tmp.replace(out)
