"""Salvage: the JUnit written from the plugin's partial file when pytest died before
writing its own (harness.results.junit_write), and the counts read back from it. A
salvaged failure must stay a failure, an xfail an xfail, and nothing run may be lost."""

from __future__ import annotations

import json
import platform
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from _pytest.junitxml import LogXML, xml_key

from harness.plugin.partial import PartialResults
from harness.results import junit_write
from harness.results.junit_read import JunitReader
from harness.results.junit_write import (
    append_error_case,
    read_partial,
    settle_partial,
    write_salvaged_junit,
)
from harness.results.layout import progress_for_partial
from harness.results.sidecar import result_line
from harness.results.suite_junit import read_suite


def count_junit(path: Path, warn: Callable[[str], None] = lambda line: None) -> dict[str, int]:
    """A JUnit file's cases by outcome, as the one reader counts them for a suite."""
    return read_suite(path, "s", warn).counts


RECORDS = [
    {"nodeid": "suites/a/test_k.py::test_pass", "when": "call", "outcome": "passed",
     "duration": 1.25, "message": "", "properties": [["op", "rms_norm"]]},
    {"nodeid": "suites/a/test_k.py::test_fail[bf16]", "when": "call", "outcome": "failed",
     "duration": 0.5, "message": "AssertionError: out of tolerance\nmore",
     "properties": [["nodeid", "suites/a/test_k.py::test_fail[bf16]"], ["headroom", "3"]]},
    {"nodeid": "suites/a/test_k.py::test_setup", "when": "setup", "outcome": "failed",
     "duration": 0, "message": "fixture broke", "properties": []},
    {"nodeid": "suites/a/test_k.py::test_skip", "when": "setup", "outcome": "skipped",
     "duration": "0.1", "message": "needs fp8", "properties": []},
    {"nodeid": "suites/a/test_k.py::test_known", "when": "call", "outcome": "xfailed",
     "duration": 0.2, "message": "known: bf16 rounding", "properties": []},
    {"nodeid": "suites/a/test_k.py::test_lucky", "when": "call", "outcome": "xpassed",
     "duration": 0.2, "message": "", "properties": []},
    {"nodeid": "suites/a/test_broken.py", "when": "collect", "outcome": "failed",
     "duration": 0.0, "message": "ImportError: no module", "properties": []},
]


def _partial(tmp_path: Path, records: list[dict[str, object]], tail: str = "") -> Path:
    path = tmp_path / "k.partial.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def _cases(junit: Path) -> dict[str, ET.Element]:
    return {c.get("name", ""): c for c in ET.parse(junit).getroot().iter("testcase")}


def test_every_record_keeps_its_outcome_and_the_crash_is_an_error(tmp_path: Path) -> None:
    junit = tmp_path / "k.xml"  # beside its partial file: the sidecar the reader joins
    running = write_salvaged_junit(junit, "kernels", _partial(tmp_path, RECORDS),
                                   "crashed: killed by SIGSEGV", ["line 1", "line 2"])
    assert running == []
    assert count_junit(junit) == {"passed": 2, "failed": 1, "error": 3, "skipped": 1,
                                  "xfailed": 1}
    statuses = {c.nodeid: c.status for c in JunitReader(junit, print)}
    assert statuses == {
        "suites/a/test_k.py::test_pass": "passed",
        "suites/a/test_k.py::test_fail[bf16]": "failed",
        "suites/a/test_k.py::test_setup": "error",
        "suites/a/test_k.py::test_skip": "skipped",
        "suites/a/test_k.py::test_known": "xfail",
        "suites/a/test_k.py::test_lucky": "passed",
        "suites/a/test_broken.py": "error",
        "harness.kernels::kernels: crashed: killed by SIGSEGV": "error",
    }
    root = ET.parse(junit).getroot()
    (suite,) = root.iter("testsuite")
    assert root.tag == "testsuites" and suite.get("name") == "kernels"
    assert suite.get("tests") == str(len(RECORDS) + 1)


def test_a_salvaged_case_reads_as_pytest_writes_it(tmp_path: Path) -> None:
    junit = tmp_path / "k.xml"
    write_salvaged_junit(junit, "kernels", _partial(tmp_path, RECORDS), "timeout", ["last"])
    cases = _cases(junit)
    passed = cases["test_pass"]
    assert passed.get("classname") == "suites.a.test_k" and passed.get("time") == "1.250"
    assert passed.find("properties") is None  # xunit2: the properties are the sidecar's
    props = {c.nodeid: dict(c.properties) for c in JunitReader(junit, print)}
    assert props["suites/a/test_k.py::test_pass"]["op"] == "rms_norm"
    assert props["suites/a/test_k.py::test_fail[bf16]"]["headroom"] == "3"
    failed = cases["test_fail[bf16]"]
    (failure,) = failed.iter("failure")
    assert failure.get("message") == "AssertionError: out of tolerance\nmore"
    assert failure.text == "AssertionError: out of tolerance\nmore"
    (error,) = cases["test_setup"].iter("error")
    assert error.get("message") == "fixture broke"
    (skipped,) = cases["test_skip"].iter("skipped")
    assert skipped.get("message") == "needs fp8" and skipped.get("type") is None
    assert cases["test_skip"].get("time") == "0.100"
    (known,) = cases["test_known"].iter("skipped")
    assert known.get("type") == "pytest.xfail" and known.text == "known: bf16 rounding"
    assert list(cases["test_lucky"]) == []
    broken = cases["suites.a.test_broken"]  # named as pytest names a module it cannot collect
    assert broken.get("classname") == "" and broken.find("error") is not None
    crash = cases["kernels: timeout"]
    assert crash.get("classname") == "harness.kernels" and crash.get("time") == "0"
    (cause,) = crash.iter("error")
    assert cause.get("message") == "timeout" and cause.text == "last"


LIMIT = junit_write._MESSAGE_LIMIT


def test_long_messages_are_cut_in_the_attribute_only(tmp_path: Path) -> None:
    record = {**RECORDS[1], "message": "x" * (LIMIT + 500)}
    junit = tmp_path / "k.xml"
    write_salvaged_junit(junit, "k", _partial(tmp_path, [record]), "crashed", [])
    (failure,) = ET.parse(junit).getroot().iter("failure")
    assert len(failure.get("message", "")) == LIMIT and len(failure.text or "") == LIMIT + 500


def test_odd_or_missing_durations_read_as_zero(tmp_path: Path) -> None:
    odd = {**RECORDS[0], "duration": None}
    missing = {k: v for k, v in RECORDS[1].items() if k != "duration"}
    junit = tmp_path / "k.xml"
    write_salvaged_junit(junit, "k", _partial(tmp_path, [odd, missing]), "crashed", [])
    assert _cases(junit)["test_pass"].get("time") == "0.000"
    assert _cases(junit)["test_fail[bf16]"].get("time") == "0.000"


def test_the_file_is_declared_utf8_and_made_with_its_folders(tmp_path: Path) -> None:
    junit = tmp_path / "new" / "folder" / "k.xml"  # made, with its parents
    write_salvaged_junit(junit, "k", _partial(tmp_path, RECORDS[:1]), "crashed", [])
    assert junit.read_text().startswith("<?xml version='1.0' encoding='utf-8'?>")
    assert "test_pass" in _cases(junit)


def test_a_setup_error_s_message_is_cut_in_the_attribute_only(tmp_path: Path) -> None:
    record = {**RECORDS[2], "message": "s" * (LIMIT + 100)}
    junit = tmp_path / "k.xml"
    write_salvaged_junit(junit, "k", _partial(tmp_path, [record]), "crashed", [])
    (error, _) = ET.parse(junit).getroot().iter("error")
    assert len(error.get("message", "")) == LIMIT and len(error.text or "") == LIMIT + 100


def test_the_line_being_written_when_the_process_died_is_dropped(tmp_path: Path) -> None:
    path = _partial(tmp_path, RECORDS[:2], tail='{"nodeid": "suites/a/test_k.py::test_x", "ou')
    assert [r["nodeid"] for r in read_partial(path)] == [r["nodeid"] for r in RECORDS[:2]]
    # a damaged line is skipped; the runner's lines after it (the tests a crash stopped or
    # never ran) start on a line of their own and are read
    path.write_text(json.dumps(RECORDS[0]) + "\nnot json\n" + json.dumps(RECORDS[1]) + "\n")
    assert [r["nodeid"] for r in read_partial(path)] == [r["nodeid"] for r in RECORDS[:2]]
    assert read_partial(tmp_path / "absent.jsonl") == []


def test_without_a_partial_file_the_crash_case_is_alone(tmp_path: Path) -> None:
    junit = tmp_path / "k.xml"
    write_salvaged_junit(junit, "k", tmp_path / "none.jsonl", "no junit", ["tail"])
    assert count_junit(junit) == {"error": 1}


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    junit = tmp_path / "k.xml"
    junit.write_text("old")

    def full_disk(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(junit_write.os, "replace", full_disk)
    with pytest.raises(OSError):
        write_salvaged_junit(junit, "k", _partial(tmp_path, RECORDS), "crashed", [])
    assert junit.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.partial.jsonl", "k.xml"]


PYTEST_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="t" name="test_a" time="0.1"/>
<testcase classname="t" name="test_b" time="0.1">
<skipped type="pytest.xfail" message="k"/></testcase>
<testcase classname="t" time="0.0"/>
</testsuite></testsuites>
"""


def test_an_error_case_appended_to_what_pytest_wrote(tmp_path: Path) -> None:
    junit = tmp_path / "k.xml"
    junit.write_text(PYTEST_JUNIT)
    append_error_case(junit, "k", "crashed after the tests", ["tail line"])
    # the nameless case pytest wrote for the test it was in is no passed test
    assert count_junit(junit) == {"passed": 1, "xfailed": 1, "error": 1}
    text = junit.read_text()
    assert text.index('name="k: crashed after the tests"') < text.rindex("</testsuite>")
    assert not (tmp_path / "k.xml.tmp").exists()


def test_an_empty_suite_is_written_whole(tmp_path: Path) -> None:
    junit = tmp_path / "k.xml"
    junit.write_text('<testsuites><testsuite name="pytest" tests="0"/></testsuites>')
    append_error_case(junit, "k", "crashed", ["tail"])
    assert count_junit(junit) == {"error": 1}


def test_counts_name_xfail_and_xpass_apart(tmp_path: Path) -> None:
    junit = tmp_path / "k.xml"
    junit.write_text(
        '<testsuite name="s"><testcase classname="c" name="a"/>'
        '<testcase classname="c" name="b"><failure message="[XPASS(strict)] k"/></testcase>'
        '<testcase classname="c" name="c"><skipped type="pytest.xfail" message="k"/></testcase>'
        '<testcase classname="c" name="d"><skipped message="why"/></testcase></testsuite>')
    assert count_junit(junit) == {"passed": 1, "xpassed": 1, "xfailed": 1, "skipped": 1}
    warnings: list[str] = []
    assert count_junit(tmp_path / "absent.xml", warnings.append) == {}
    assert warnings


def test_a_damaged_sidecar_line_stops_neither_counts_nor_reading(tmp_path: Path) -> None:
    """(Bad input, hand-built.) A sidecar line whose properties are no pairs (a tampered
    or damaged folder) reads as a case without properties: the counts come from the
    cases' own elements, and ingest or repro reading the sidecar get no traceback."""
    junit = tmp_path / "k.xml"
    junit.write_text('<testsuite name="k"><testcase classname="t" name="test_a"/>'
                     '<testcase classname="t" name="test_b"/></testsuite>')
    (tmp_path / "k.partial.jsonl").write_text(
        json.dumps({"nodeid": "t.py::test_a", "properties": [["op"]]}) + "\n"
        + json.dumps({"nodeid": "t.py::test_b", "properties": {"op": "silu"}}) + "\n")
    assert count_junit(junit) == {"passed": 2}
    read = {c.nodeid: dict(c.properties) for c in JunitReader(junit, print)}
    assert read["t.py::test_a"] == {"nodeid": "t.py::test_a"}
    assert read["t.py::test_b"]["op"] == "silu"


def test_what_counts_as_failing_and_as_infrastructure() -> None:
    from harness.results.outcome import Status, failing

    assert failing({"failed": 1}) and failing({"xpassed": 2, "passed": 3})
    assert not failing({"passed": 3, "error": 1, "xfailed": 2, "skipped": 1})
    assert not failing({"failed": 0}) and not failing({})
    assert {s for s in Status if s.unfinished} == {
        Status.ERROR, Status.TIMEOUT, Status.CRASHED, Status.NO_JUNIT, Status.WRITE_FAILED}


# -- the tests a stopped suite was running and never ran -------------------------------------
# The progress file is written by the plugin's own recorder (harness.plugin.partial), the
# partial file's lines by ``sidecar.result_line``, as a run writes them.

A, B, C, D = (f"t.py::test_{n}" for n in "abcd")


def _run(folder: Path, collected: list[str], started: list[str], ended: list[str],
         properties: tuple[tuple[str, str], ...] = (), cut: str = "") -> Path:
    """What a suite leaves in ``folder`` when it stops: the recorder's progress file
    (``collected``, each test in ``started``, the suite properties the plugin added) and
    a partial file with a passed line for each test in ``ended``, then ``cut`` (the line
    a crash cut short). Returns the partial file."""
    xml = LogXML(str(folder / "k.xml"), None)
    for name, value in properties:
        xml.add_global_property(name, value)
    config = SimpleNamespace(stash=pytest.Stash())
    config.stash[xml_key] = xml
    partial = folder / "k.partial.jsonl"
    recorder = PartialResults(cast(pytest.Config, config), partial,
                              progress_for_partial(partial))
    recorder.pytest_xdist_node_collection_finished(None, collected)
    for test in started:
        recorder.pytest_runtest_logstart(test)
    recorder.pytest_unconfigure()
    with partial.open("a", encoding="utf-8") as handle:
        handle.write("".join(result_line(t, "call", "passed", 0.5, "", ()) for t in ended) + cut)
    return partial


def _line(test: str, when: str, outcome: str, message: str) -> dict[str, object]:
    return {"nodeid": test, "when": when, "outcome": outcome, "duration": 0.0,
            "message": message, "properties": {}}


def test_a_crash_fails_the_test_it_was_in_and_skips_the_ones_never_run(tmp_path: Path) -> None:
    partial = _run(tmp_path, [A, B, C, D], [A, B], [A])
    before = partial.read_text()
    running, lines = settle_partial(partial, "crashed: exit 139", "crashed")
    assert running == [B]
    assert [json.loads(line) for line in lines] == [
        _line(B, "running", "failed", "crashed: exit 139 while this test ran"),
        _line(C, "notrun", "skipped", f"not run: the suite crashed in {B}"),
        _line(D, "notrun", "skipped", f"not run: the suite crashed in {B}"),
    ]
    # appended after the complete lines, nothing in between: one line per test
    assert partial.read_text() == before + "".join(lines)
    assert [r["nodeid"] for r in read_partial(partial)] == [A, B, C, D]


def test_a_stop_between_tests_names_no_test(tmp_path: Path) -> None:
    partial = _run(tmp_path, [A, B, C], [A, B], [A, B])
    running, lines = settle_partial(partial, "timeout after 60s", "timed out")
    assert running == []
    assert [json.loads(line) for line in lines] == [
        _line(C, "notrun", "skipped", "not run: the suite timed out")]


def test_the_lines_added_follow_the_line_a_crash_cut_short(tmp_path: Path) -> None:
    cut = '{"nodeid": "t.py::test_b", "wh'
    partial = _run(tmp_path, [A, B, C], [A, B], [A], cut=cut)
    before = partial.read_text()
    running, lines = settle_partial(partial, "crashed", "crashed")
    assert running == [B]
    assert partial.read_text() == before + "\n" + "".join(lines)
    assert [(r["nodeid"], r["outcome"]) for r in read_partial(partial)] == [
        (A, "passed"), (B, "failed"), (C, "skipped")]


@pytest.mark.parametrize("absent", [False, True], ids=["empty", "absent"])
def test_a_crash_before_any_test_ended_starts_the_partial_file(
        tmp_path: Path, absent: bool) -> None:
    partial = _run(tmp_path, [A, B], [A], [])  # the recorder made it, empty
    assert partial.read_text() == ""
    if absent:
        partial.unlink()
    running, lines = settle_partial(partial, "killed by SIGKILL", "crashed")
    assert running == [A] and len(lines) == 2
    assert partial.read_text() == "".join(lines)


def test_a_suite_that_ran_everything_gets_no_line(tmp_path: Path) -> None:
    partial = _run(tmp_path, [A, B], [A, B], [A, B])
    before = partial.read_text()
    assert settle_partial(partial, "crashed after the tests", "crashed") == ([], [])
    assert partial.read_text() == before
    # no progress file and no partial file: none is made
    nothing = tmp_path / "none" / "k.partial.jsonl"
    nothing.parent.mkdir()
    assert settle_partial(nothing, "crashed", "crashed") == ([], [])
    assert list(nothing.parent.iterdir()) == []


def _suite(junit: Path) -> ET.Element:
    (suite,) = ET.parse(junit).getroot().iter("testsuite")
    return suite


def test_the_salvaged_suite_says_when_where_and_with_which_properties(tmp_path: Path) -> None:
    partial = _run(tmp_path, [A, B], [A, B], [A],
                   properties=(("matrix", "cpu"), ("lane", "vllm-cpu")))
    junit = tmp_path / "k.xml"
    running = write_salvaged_junit(junit, "k", partial, "crashed", [], "crashed", 12.5)
    assert running == [B]
    facts = json.loads(progress_for_partial(partial).read_text().splitlines()[0])["suite"]
    suite = _suite(junit)
    assert suite.get("time") == "12.500"
    assert suite.get("timestamp") == facts["timestamp"] and facts["timestamp"]
    assert suite.get("hostname") == platform.node()
    assert [(p.get("name"), p.get("value")) for p in suite.iter("property")] == [
        ("matrix", "cpu"), ("lane", "vllm-cpu")]
    reader = JunitReader(junit, pytest.fail)
    assert {c.nodeid: c.status for c in reader} == {
        A: "passed", B: "error", "harness.k::k: crashed": "error"}
    assert reader.suites["k"].properties == {"matrix": "cpu", "lane": "vllm-cpu"}


def test_a_salvaged_suite_without_properties_has_no_properties_element(tmp_path: Path) -> None:
    partial = _run(tmp_path, [A], [A], [A])  # the plugin recorded an empty dict
    junit = tmp_path / "k.xml"
    write_salvaged_junit(junit, "k", partial, "crashed", [])
    suite = _suite(junit)
    assert suite.find("properties") is None
    assert suite.get("time") == "0.000" and suite.get("hostname") == platform.node()


def test_a_salvaged_suite_s_time_is_never_negative(tmp_path: Path) -> None:
    junit = tmp_path / "k.xml"  # (a clock stepped back while the suite ran)
    write_salvaged_junit(junit, "k", _run(tmp_path, [A], [A], [A]), "crashed", [], seconds=-3.0)
    assert _suite(junit).get("time") == "0.000"
    assert count_junit(junit) == {"passed": 1, "error": 1}


CANCELLED = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="2">
<testcase classname="t" name="test_a" time="0.5"/>
<testcase classname="t" time="0.0"/>
</testsuite></testsuites>
"""  # pytest's file after Ctrl-C in test_b: an empty, nameless case for it


def test_a_cancel_adds_the_running_and_never_run_tests_to_pytest_s_file(tmp_path: Path) -> None:
    partial = _run(tmp_path, [A, B, C], [A, B], [A])
    junit = tmp_path / "k.xml"
    junit.write_text(CANCELLED)
    running = append_error_case(junit, "k", "cancelled", ["tail"], partial, "was interrupted")
    assert running == [B]
    cases = _cases(junit)
    (error,) = cases["test_b"].iter("error")
    assert error.get("message") == "cancelled while this test ran"
    (skipped,) = cases["test_c"].iter("skipped")
    assert skipped.get("message") == f"not run: the suite was interrupted in {B}"
    assert skipped.get("type") == junit_write.NOT_RUN_TYPE
    assert count_junit(junit) == {"passed": 1, "error": 2, "skipped": 1}
