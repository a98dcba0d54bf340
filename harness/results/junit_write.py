"""Read back the JUnit a suite wrote, and write JUnit when the suite could not.

When pytest dies before writing its JUnit (a segfault, an OOM kill, a hang killed
from outside), the per-test JSON-lines file the plugin kept is turned into JUnit, and
an error test case names the cause with the last log lines: nothing already run is lost.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET  # only builds elements to write; reading is junit_read's
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from harness.results.junit_read import NODEID_PROPERTY, JunitReader, Warn

_COUNT_NAME = {"xfail": "xfailed", "xpass": "xpassed"}


def _quiet(line: str) -> None:
    """A damaged file still counts the cases before the damage."""

_NAMELESS_CASE = re.compile(r"<testcase(?![^>]*\bname=)[^>]*/>")
_OUTCOME_TO_CHILD = {"failed": "failure", "skipped": "skipped", "xfailed": "skipped"}


def count_junit(path: Path, warn: Warn = _quiet) -> dict[str, int]:
    """Test cases of a JUnit file by outcome (xfailed / xpassed apart from skipped)."""
    counts: Counter[str] = Counter()
    for case in JunitReader(path, warn):
        counts[_COUNT_NAME.get(case.status, case.status)] += 1
    return dict(counts)


def _case_from_record(record: dict[str, object]) -> ET.Element:
    nodeid = str(record["nodeid"])
    path, _, name = nodeid.rpartition("::")
    classname = path.replace("/", ".").removesuffix(".py") if path else ""
    duration = record.get("duration", 0.0)
    seconds = float(duration) if isinstance(duration, int | float | str) else 0.0
    case = ET.Element("testcase", classname=classname, name=name or nodeid, time=f"{seconds:.3f}")
    props = list(record.get("properties") or [])  # type: ignore[call-overload]
    if not any(key == NODEID_PROPERTY for key, _ in props):
        props.insert(0, [NODEID_PROPERTY, nodeid])
    if props:
        container = ET.SubElement(case, "properties")
        for key, value in props:
            ET.SubElement(container, "property", name=str(key), value=str(value))
    outcome = str(record.get("outcome"))
    message = str(record.get("message") or "")
    if outcome == "failed" and record.get("when") != "call":
        child = ET.SubElement(case, "error", message=message[:200])
        child.text = message
    elif outcome in _OUTCOME_TO_CHILD:
        child = ET.SubElement(case, _OUTCOME_TO_CHILD[outcome], message=message[:200])
        if outcome == "xfailed":  # as pytest writes one: an xfail, not a skip
            child.set("type", "pytest.xfail")
        child.text = message
    return case


def error_case(suite: str, cause: str, log_tail: Iterable[str]) -> ET.Element:
    case = ET.Element("testcase", classname=f"harness.{suite}", name=f"{suite}: {cause}", time="0")
    child = ET.SubElement(case, "error", message=cause)
    child.text = "\n".join(log_tail)
    return case


def read_partial(path: Path) -> list[dict[str, object]]:
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break  # the line being written when the process died
    return records


def write_salvaged_junit(
    junit: Path, suite: str, partial: Path, cause: str, log_tail: Iterable[str]
) -> dict[str, int]:
    """Write ``junit`` from the partial records plus one error case naming ``cause``."""
    cases = [_case_from_record(r) for r in read_partial(partial)]
    cases.append(error_case(suite, cause, log_tail))
    suite_el = ET.Element("testsuite", name=suite, tests=str(len(cases)))
    suite_el.extend(cases)
    root = ET.Element("testsuites")
    root.append(suite_el)
    junit.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(junit)
    try:  # a write that fails (a full disk) leaves the file as it was, never half written
        ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
        os.replace(tmp, junit)
    finally:
        tmp.unlink(missing_ok=True)
    return count_junit(junit)


def append_error_case(junit: Path, suite: str, cause: str, log_tail: Iterable[str]) -> None:
    """Add an error case to a JUnit file pytest did write (e.g. exit 0 but a crash after).

    The case goes in before the last ``</testsuite>``; the file is not parsed again.
    """
    # pytest interrupted mid-test writes an empty <testcase/> for it: not a passed test.
    text = _NAMELESS_CASE.sub("", junit.read_text(encoding="utf-8"))
    at = text.rfind("</testsuite>")
    if at < 0:  # an empty <testsuite/> or no suite at all: write it whole instead
        write_salvaged_junit(junit, suite, junit.with_suffix(".none"), cause, log_tail)
        return
    case = ET.tostring(error_case(suite, cause, log_tail), encoding="unicode")
    tmp = _tmp(junit)
    try:
        tmp.write_text(text[:at] + case + text[at:], encoding="utf-8")
        os.replace(tmp, junit)
    finally:
        tmp.unlink(missing_ok=True)


def _tmp(path: Path) -> Path:
    return path.with_name(path.name + ".tmp")
