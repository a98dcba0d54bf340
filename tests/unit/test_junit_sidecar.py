"""The JUnit file's sidecar: the join on pytest's (classname, name), the read-ahead
window, and the counts a strict reader recounts (results/sidecar.py, junit_counts.py)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.results import sidecar
from harness.results.junit_counts import recount
from harness.results.junit_read import read_junit
from harness.results.junit_write import write_salvaged_junit
from harness.results.sidecar import address, result_line

ODD_IDS = '''
import pytest

class TestGroup:
    @pytest.mark.parametrize("spec", ["a::b", "c/d", "e[f]", "g.py"])
    def test_in_class(self, spec):
        pass

    class TestInner:
        def test_nested(self):
            pass

@pytest.mark.parametrize("n", [1, 2])
def test_plain(n, record_property):
    record_property("op", "rms_norm")
    assert n == 1
'''


def test_pytest_names_each_case_at_the_address_of_its_node_id(
    pytester: pytest.Pytester,
) -> None:
    """What pytest really writes: each sidecar line's address is a case of the JUnit file,
    so the reader gives every case its node id and properties, none rebuilt."""
    (pytester.path / "pkg.sub").mkdir()
    (pytester.path / "pkg.sub" / "test_odd.py").write_text(ODD_IDS)
    junit, partial = pytester.path / "out.xml", pytester.path / "out.partial.jsonl"
    result = pytester.runpytest("pkg.sub", f"--junitxml={junit}", "-o", "junit_family=xunit2",
                                f"--harness-partial={partial}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6, failed=1)
    nodeids = [json.loads(line)["nodeid"] for line in partial.read_text().splitlines()]
    written = [(c.get("classname"), c.get("name"))
               for c in ET.parse(junit).getroot().iter("testcase")]
    assert [address(n) for n in nodeids] == written
    assert "<properties>" not in junit.read_text().split("</properties>")[-1]
    cases, _ = read_junit(junit, pytest.fail)
    assert [c.nodeid for c in cases] == nodeids
    by_id = {c.nodeid: c for c in cases}
    plain = "pkg.sub/test_odd.py::test_plain[2]"
    assert by_id[plain].properties["op"] == "rms_norm" and by_id[plain].status == "failed"


def _write_case_pair(folder: Path, order: list[int], junit_order: list[int]) -> Path:
    lines = [result_line(f"t.py::test_{i}", "call", "passed", 0.1, "", [("n", str(i))])
             for i in order]
    (folder / "s.partial.jsonl").write_text("".join(lines) + '{"nodeid": "t.py::cut')
    cases = "".join(f'<testcase classname="t" name="test_{i}" time="0.1"/>' for i in junit_order)
    junit = folder / "s.xml"
    junit.write_text(f'<testsuites><testsuite name="s" tests="0">{cases}</testsuite></testsuites>')
    return junit


def test_the_window_joins_out_of_order_and_missing_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Hand-built: the window's limits.) Lines ended in another order than the cases
    started (xdist), a case with no line, a line cut short by a crash: each case that has
    a line within the window gets it, the others keep the rebuilt id."""
    monkeypatch.setattr(sidecar, "WINDOW", 4)
    monkeypatch.setattr(sidecar, "_KEEP", 8)
    monkeypatch.setattr(sidecar, "_DROP", 2)
    ended = [1, 0, 3, 2, *range(4, 30), 99]
    started = [0, 1, 2, 3, 42, *range(4, 30), 99]
    cases, _ = read_junit(_write_case_pair(tmp_path, ended, started), pytest.fail)
    props = {c.nodeid: c.properties for c in cases}
    assert all(props[f"t.py::test_{i}"]["n"] == str(i) for i in [*range(30), 99])
    assert props["t::test_42"] == {}  # no line: the id rebuilt from classname and name
    # Further apart than the window: not joined, never wrong.
    far, _ = read_junit(_write_case_pair(tmp_path, [*range(1, 20), 0], list(range(20))),
                        pytest.fail)
    assert far[0].properties == {} and far[0].nodeid == "t::test_0"
    assert all(c.properties["n"] == c.nodeid.rpartition("_")[2] for c in far[1:])
    # What it keeps is bounded, however many cases it misses.
    side = sidecar.Sidecar(tmp_path / "s.partial.jsonl")
    first = side.find("t", "test_1")  # a test with two cases (a failure, a teardown error)
    assert first is not None and side.find("t", "test_1") is first
    for i in range(100, 120):
        assert side.find("t", f"test_{i}") is None
        assert len(side._ahead) <= 8
    side.close()


def test_a_partial_file_from_before_the_sidecar_still_joins(tmp_path: Path) -> None:
    (tmp_path / "s.partial.jsonl").write_text(json.dumps(
        {"nodeid": "a/t.py::test_x", "when": "call", "outcome": "passed", "duration": 0.1,
         "message": "", "properties": [["nodeid", "a/t.py::test_x"], ["op", "linear"]]}) + "\n")
    junit = tmp_path / "s.xml"
    junit.write_text('<testsuite name="s" tests="1"><testcase classname="a.t" name="test_x"/>'
                     "</testsuite>")
    (case,), _ = read_junit(junit, pytest.fail)
    assert case.nodeid == "a/t.py::test_x" and case.properties["op"] == "linear"


def test_recount_makes_every_suite_say_what_it_holds() -> None:
    data = (b'<?xml version="1.0"?><testsuites><testsuite name="a&amp;b" tests="9" '
            b'failures="1" skipped="0" time="1.5">'
            b'<testcase name="x"><failure message="[XPASS(strict)] r"/></testcase>'
            b'<testcase name="y"><skipped/><error/></testcase><testcase name="z"/>'
            b'<testsuite name="inner" tests="0"><testcase name="w"><error/></testcase>'
            b"</testsuite></testsuite><testsuite name='empty' tests='3'/></testsuites>")
    out, top = recount(data)
    suites = {s.get("name"): s.attrib for s in ET.fromstring(out).iter("testsuite")}
    assert suites["a&b"] | {} == {"name": "a&b", "tests": "4", "failures": "1", "skipped": "1",
                                  "time": "1.5", "errors": "1"}
    assert suites["inner"]["tests"] == "1" and suites["inner"]["errors"] == "1"
    assert suites["empty"] == {"name": "empty", "tests": "0", "failures": "0", "errors": "0",
                               "skipped": "0"}
    assert (top.tests, top.failures, top.errors, top.skipped, top.time) == (4, 1, 1, 1, 1.5)


def test_a_line_cut_short_by_the_crash_keeps_the_lines_the_runner_adds(tmp_path: Path) -> None:
    """(Hand-built: a crash in the middle of a line.) The test being written, the one
    running and the one never reached all become cases, with their node ids."""
    partial = tmp_path / "s.partial.jsonl"
    done = result_line("t.py::test_a", "call", "passed", 0.1, "", [("op", "x")])
    partial.write_text(done + '{"nodeid": "t.py::test_b", "wh')
    (tmp_path / "s.progress.jsonl").write_text(
        json.dumps({"collected": ["t.py::test_a", "t.py::test_b", "t.py::test_c"],
                    "suite": {"properties": {"matrix": "cpu"}}}) + "\n"
        + "".join(json.dumps({"started": t}) + "\n" for t in ("t.py::test_a", "t.py::test_b"))
        + '{"started": "t.py::te')
    junit = tmp_path / "s.xml"
    running = write_salvaged_junit(junit, "s", partial, "crashed: exit 139", ["tail"], "crashed")
    assert running == ["t.py::test_b"]
    cases, suites = read_junit(junit, pytest.fail)
    got = {c.nodeid: (c.status, c.message) for c in cases}
    assert got == {
        "t.py::test_a": ("passed", ""),
        "t.py::test_b": ("error", "crashed: exit 139 while this test ran"),
        "t.py::test_c": ("skipped", "not run: the suite crashed in t.py::test_b"),
        "harness.s::s: crashed: exit 139": ("error", "crashed: exit 139 in t.py::test_b"),
    }
    assert suites["s"].properties == {"matrix": "cpu"}
    suite = ET.parse(junit).getroot()[0]
    assert (suite.get("tests"), suite.get("errors"), suite.get("skipped")) == ("4", "2", "1")
