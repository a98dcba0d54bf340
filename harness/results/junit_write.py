"""Read back the JUnit a suite wrote, and write JUnit when the suite could not.

When pytest dies before writing its JUnit (a segfault, an OOM kill, a hang killed
from outside), the per-test JSON-lines file the plugin kept is turned into JUnit, and
an error test case names the cause with the last log lines: nothing already run is lost.
Whenever the runner adds such a case (to pytest's file too, after a cancel), the tests
the suite was running get an error case each and the collected tests it never ran a
skipped case ``not run: the suite crashed in <test>`` (from the plugin's progress file);
their lines go into the partial file too, so the JUnit and its sidecar stay one-to-one.
Every file written here is xunit2 (junit-10.xsd) with counts that match its cases.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import xml.etree.ElementTree as ET  # only builds elements to write; reading is junit_read's
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers import expat

from harness.results.cause import CAUSE_PROPERTY, CauseRecord, as_property
from harness.results.junit_counts import recount
from harness.results.layout import progress_for_partial
from harness.results.sidecar import address, read_records, result_line
from harness.results.testids import case_ids

NOT_RUN_TYPE = "harness.notrun"  # the <skipped> type of a test a stopped suite never ran
RUNNING = "running"  # a record's ``when`` for a test the suite was running when it stopped
NOT_RUN = "notrun"
NOT_RUN_WORDS = "not run: the suite "  # how such a test's <skipped> message begins
_MESSAGE_LIMIT = 1000


def _quiet(line: str) -> None:
    """A damaged file still counts the cases before the damage."""

_NAMELESS_CASE = re.compile(r"<testcase(?![^>]*\bname=)[^>]*/>")
_OUTCOME_TO_CHILD = {"failed": "failure", "skipped": "skipped", "xfailed": "skipped"}


def read_partial(path: Path) -> list[dict[str, object]]:
    """The result lines of a partial file (``sidecar.read_records``)."""
    return read_records(path)


def _case_from_record(record: dict[str, object]) -> ET.Element:
    classname, name = address(str(record["nodeid"]))
    duration = record.get("duration", 0.0)
    seconds = float(duration) if isinstance(duration, int | float | str) else 0.0
    case = ET.Element("testcase", classname=classname, name=name, time=f"{seconds:.3f}")
    outcome = str(record.get("outcome"))
    message = str(record.get("message") or "")
    # Before the partial file kept a one-line message apart, "message" held the report.
    text = str(record.get("details") or message)
    if outcome == "failed" and record.get("when") != "call":
        child = ET.SubElement(case, "error", message=message[:_MESSAGE_LIMIT])
        child.text = text
    elif outcome in _OUTCOME_TO_CHILD:
        child = ET.SubElement(case, _OUTCOME_TO_CHILD[outcome], message=message[:_MESSAGE_LIMIT])
        child.text = text
        if record.get("when") == NOT_RUN:
            child.set("type", NOT_RUN_TYPE)
        elif outcome == "xfailed":
            child.set("type", "pytest.xfail")
    return case


def error_case(suite: str, cause: str, log_tail: Iterable[str], running: list[str]) -> ET.Element:
    case = ET.Element("testcase", classname=f"harness.{suite}", name=f"{suite}: {cause}", time="0")
    where = f" in {', '.join(running)}" if running else ""
    child = ET.SubElement(case, "error", message=cause + where)
    child.text = "\n".join([*(f"running: {test}" for test in running), *log_tail])
    return case


@dataclass
class Progress:
    """What the plugin's progress file says: the collected node ids, the tests in the
    order they started, and the suite's facts (timestamp, hostname, properties)."""

    collected: list[str] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    suite: dict[str, object] = field(default_factory=dict)


def read_progress(path: Path) -> Progress:
    progress = Progress()
    if not path.is_file():
        return progress
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                break  # the line being written when the process died
            if not isinstance(record, dict):
                continue
            if isinstance(record.get("started"), str):
                progress.started.append(record["started"])
            elif isinstance(record.get("collected"), list) and not progress.collected:
                progress.collected = [str(test) for test in record["collected"]]
                suite = record.get("suite")
                progress.suite = suite if isinstance(suite, dict) else {}
    return progress


def settle_partial(partial: Path, cause: str, stopped: str,
                   recorded: CauseRecord | None = None) -> tuple[list[str], list[str]]:
    """Add to the partial file a line for each test the suite was running when it
    stopped (an error: ``cause`` while it ran) and each collected test it never ran
    (``not run: the suite <stopped> in <test>``). Returns (running, the lines added)."""
    finished = {str(record["nodeid"]) for record in read_records(partial)}
    progress = read_progress(progress_for_partial(partial))
    collected, started = progress.collected, progress.started
    running = [test for test in dict.fromkeys(started) if test not in finished]
    where = f" in {', '.join(running)}" if running else ""
    props = _cause_properties(recorded)
    lines = [result_line(test, RUNNING, "failed", 0.0, f"{cause} while this test ran", props)
             for test in running]
    done = finished | set(running)
    lines += [result_line(test, NOT_RUN, "skipped", 0.0, f"{NOT_RUN_WORDS}{stopped}{where}", ())
              for test in collected if test not in done]
    if lines:
        partial.parent.mkdir(parents=True, exist_ok=True)
        with partial.open("a+b") as handle:  # (appends whatever the position)
            if handle.seek(0, os.SEEK_END):
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")  # after the line a crash cut short: readers skip it
            handle.write("".join(lines).encode("utf-8"))
    return running, lines


def _suite_element(suite: str, facts: dict[str, object], seconds: float) -> ET.Element:
    """The <testsuite> of a salvaged file, with what the plugin recorded at collection
    (timestamp, hostname, the suite properties); its counts are filled in after."""
    element = ET.Element("testsuite", name=suite, time=f"{max(seconds, 0.0):.3f}")
    for key in ("timestamp", "hostname"):
        if isinstance(value := facts.get(key), str):
            element.set(key, value)
    props = facts.get("properties")
    if isinstance(props, dict) and props:
        container = ET.SubElement(element, "properties")
        for key, value in props.items():
            ET.SubElement(container, "property", name=str(key), value=str(value))
    return element


def write_salvaged_junit(
    junit: Path, suite: str, partial: Path, cause: str, log_tail: Iterable[str],
    stopped: str = "stopped", seconds: float = 0.0, recorded: CauseRecord | None = None,
) -> list[str]:
    """Write ``junit`` from the partial records plus one error case naming ``cause``;
    returns the tests that were running. ``seconds``: how long the suite ran;
    ``recorded``: the cause as data, which the cases the harness adds carry."""
    running, _ = settle_partial(partial, cause, stopped, recorded)
    cases = [_case_from_record(r) for r in read_records(partial)]
    cases.append(error_case(suite, cause, log_tail, running))
    _record_error_case(partial, cases, recorded)
    facts = read_progress(progress_for_partial(partial)).suite
    suite_el = _suite_element(suite, facts, seconds)
    suite_el.extend(cases)
    root = ET.Element("testsuites")
    root.append(suite_el)
    data, _ = recount(ET.tostring(root, encoding="utf-8", xml_declaration=True))
    _replace(junit, data)
    return running


def append_error_case(
    junit: Path, suite: str, cause: str, log_tail: Iterable[str],
    partial: Path | None = None, stopped: str = "stopped", recorded: CauseRecord | None = None,
) -> list[str]:
    """Add an error case to a JUnit file pytest did write (e.g. exit 0 but a crash after),
    with the tests it was running and never ran; the suite's counts follow. Returns the
    tests that were running."""
    # pytest interrupted mid-test writes an empty <testcase/> for it: not a passed test.
    text = _NAMELESS_CASE.sub("", junit.read_text(encoding="utf-8"))
    at = text.rfind("</testsuite>")
    if at < 0:  # an empty <testsuite/> or no suite at all: write it whole instead
        return write_salvaged_junit(junit, suite, partial or junit.with_suffix(".none"),
                                    cause, log_tail, stopped, recorded=recorded)
    running, lines = settle_partial(partial, cause, stopped, recorded) if partial else ([], [])
    added = [_case_from_record(json.loads(line)) for line in lines]
    added.append(error_case(suite, cause, log_tail, running))
    _record_error_case(partial, added, recorded)
    cases = "".join(ET.tostring(case, encoding="unicode") for case in added)
    data = (text[:at] + cases + text[at:]).encode("utf-8")
    with contextlib.suppress(expat.ExpatError):  # damaged by pytest already: as it is
        data, _ = recount(data)
    _replace(junit, data)
    return running


def _replace(path: Path, data: bytes) -> None:
    """A write that fails (a full disk) leaves the file as it was, never half written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# Below the functions bench/mutation.py's salvage target lists (its equivalent mutants
# are numbered by their place in this module).
def _cause_properties(recorded: CauseRecord | None) -> tuple[tuple[str, object], ...]:
    """What a case the harness writes records of why its suite stopped."""
    return ((CAUSE_PROPERTY, as_property(recorded)),) if recorded else ()


def _record_error_case(partial: Path | None, cases: list[ET.Element],
                       recorded: CauseRecord | None) -> None:
    """The suite's own error case (the last of ``cases``) in the sidecar too, with its
    cause: JUnit and sidecar stay one-to-one and the history reads the case's cause, not
    its message. Its node id is the one its attributes give (``address`` gives them back)."""
    if partial is None or recorded is None:
        return
    case = cases[-1]
    nodeid = case_ids(case.get("classname", ""), case.get("name", ""))[0]
    message = next(iter(case)).get("message", "")
    line = result_line(nodeid, RUNNING, "failed", 0.0, message, _cause_properties(recorded))
    with partial.open("a+b") as handle:
        if handle.seek(0, os.SEEK_END):
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                handle.write(b"\n")  # after a line a crash cut short
        handle.write(line.encode("utf-8"))
