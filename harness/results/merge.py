"""merged.xml: every suite of a run in one file, for CI systems that read one.

Each suite file's ``<testsuite>`` elements are copied through as written, so nothing a
CI system shows (system-out, suite properties) is lost, with their counts made to match
their cases (``junit_counts``); the root's ``tests``, ``failures`` and ``errors`` are the
sums (junit-10.xsd allows no ``skipped`` there). What the one JUnit reader made of each
file when its suite ended (the suite's counts, results/suite_junit.py) stands in for a
file truncated mid-write; a file with neither is an infrastructure error naming it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from xml.parsers import expat

from harness.errors import InfraError
from harness.results.junit_counts import JUnitTotals, recount
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


def merge_junit(suites: Sequence[tuple[Path, Mapping[str, int]]], out: Path) -> None:
    """``suites``: each suite's JUnit file and its cases by outcome as its outcome has them
    (read once when it ended)."""
    totals = JUnitTotals()
    parts: list[str] = []
    for path, counts in sorted(suites, key=lambda suite: suite[0]):
        # Copied through the same cleaner the reader uses: merged.xml is always valid XML.
        cleaner = XmlCleaner()
        data = cleaner.feed(path.read_bytes(), final=True)
        if note := cleaner.replaced_note(path):
            print(f"harness: warning: {note}", file=sys.stderr)
        try:
            data, found = recount(data)
        except expat.ExpatError as error:  # truncated: the cases before the damage count
            if not counts:
                raise InfraError(f"unreadable JUnit: {path}: {error}") from None
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
