"""Read back the JUnit a suite wrote, and write JUnit when the suite could not.

When pytest dies before writing its JUnit (a segfault, an OOM kill, a hang killed
from outside), the per-test JSON-lines file the plugin kept is turned into JUnit, and
an error test case names the cause with the last log lines: nothing already run is lost.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

_OUTCOME_TO_CHILD = {"failed": "failure", "skipped": "skipped", "xfailed": "skipped"}


def count_junit(path: Path) -> dict[str, int]:
    """Counts of passed / failed / error / skipped test cases in a JUnit file."""
    counts: Counter[str] = Counter()
    for case in ET.parse(path).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        if "error" in tags:
            counts["error"] += 1
        elif "failure" in tags:
            counts["failed"] += 1
        elif "skipped" in tags:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return dict(counts)


def _case_from_record(record: dict[str, object]) -> ET.Element:
    nodeid = str(record["nodeid"])
    path, _, name = nodeid.rpartition("::")
    classname = path.replace("/", ".").removesuffix(".py") if path else ""
    duration = record.get("duration", 0.0)
    seconds = float(duration) if isinstance(duration, int | float | str) else 0.0
    case = ET.Element("testcase", classname=classname, name=name or nodeid, time=f"{seconds:.3f}")
    props = record.get("properties") or []
    if props:
        container = ET.SubElement(case, "properties")
        for key, value in props:  # type: ignore[attr-defined]
            ET.SubElement(container, "property", name=str(key), value=str(value))
    outcome = str(record.get("outcome"))
    message = str(record.get("message") or "")
    if outcome == "failed" and record.get("when") != "call":
        child = ET.SubElement(case, "error", message=message[:200])
        child.text = message
    elif outcome in _OUTCOME_TO_CHILD:
        child = ET.SubElement(case, _OUTCOME_TO_CHILD[outcome], message=message[:200])
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
    ET.ElementTree(root).write(junit, encoding="utf-8", xml_declaration=True)
    return count_junit(junit)


def append_error_case(junit: Path, suite: str, cause: str, log_tail: Iterable[str]) -> None:
    """Add an error case to a JUnit file pytest did write (e.g. exit 0 but a crash after)."""
    tree = ET.parse(junit)
    root = tree.getroot()
    target = root if root.tag == "testsuite" else next(iter(root.iter("testsuite")), root)
    target.append(error_case(suite, cause, log_tail))
    target.set("errors", str(int(target.get("errors", "0")) + 1))
    target.set("tests", str(int(target.get("tests", "0")) + 1))
    tree.write(junit, encoding="utf-8", xml_declaration=True)
