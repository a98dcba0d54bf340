"""merged.xml: every suite of a run in one file, for CI systems that read one.

Each suite file's ``<testsuite>`` elements are copied through as written, so nothing a
CI system shows (system-out, suite properties) is lost, with their counts made to match
their cases (``junit_counts``); the root's ``tests``, ``failures`` and ``errors`` are the
sums (junit-10.xsd allows no ``skipped`` there). A file that does not parse (cut mid-write:
a suite killed while pytest wrote it, a full disk) gives the cases read whole before the
damage, in a suite of its name, and an error case that names the damage: merged.xml is
valid XML whatever a suite's file holds.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from xml.etree import ElementTree
from xml.parsers import expat

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


def merge_junit(paths: Sequence[Path], out: Path) -> None:
    """``paths``: each suite's JUnit file."""
    totals = JUnitTotals()
    parts: list[str] = []
    for path in sorted(paths):
        # Copied through the same cleaner the reader uses: merged.xml is always valid XML.
        cleaner = XmlCleaner()
        data = cleaner.feed(path.read_bytes(), final=True)
        if note := cleaner.replaced_note(path):
            print(f"harness: warning: {note}", file=sys.stderr)
        try:
            data, found = recount(data)
        except expat.ExpatError as error:  # cut: the cases read whole before the damage
            data, found = recount(readable_part(data, path, error))
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


def readable_part(data: bytes, path: Path, error: expat.ExpatError) -> bytes:
    """A file that does not parse as one ``<testsuite>`` (its first suite's attributes, the
    name of the file's suite where it has none): every ``<testcase>`` read whole before the
    damage, then an error case that names the damage and the file."""
    parser: ElementTree.XMLPullParser[ElementTree.Element] = ElementTree.XMLPullParser(
        events=("start", "end"))
    attrs: dict[str, str] = {}
    cases: list[ElementTree.Element] = []
    parser.feed(data)
    try:
        for event, element in parser.read_events():  # type: ignore[misc]
            if not isinstance(element, ElementTree.Element):
                continue
            if event == "start" and element.tag == "testsuite" and not attrs:
                attrs = dict(element.attrib)
            elif event == "end" and element.tag == "testcase":
                cases.append(element)
    except ElementTree.ParseError:
        pass  # the damage, which expat's ``error`` names
    suite = ElementTree.Element("testsuite", attrs or {"name": path.stem})
    suite.extend(cases)
    damage = ElementTree.SubElement(suite, "testcase", classname="harness",
                                    name=f"{path.name}: cut mid-write")
    ElementTree.SubElement(damage, "error", message=(
        f"{path.name} does not parse ({error}): it was cut mid-write (a suite killed while "
        f"its JUnit was written, a full disk); {len(cases)} case(s) read before the damage"))
    text: bytes = ElementTree.tostring(suite, encoding="utf-8")
    return text
