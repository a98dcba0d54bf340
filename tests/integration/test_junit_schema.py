"""The JUnit ``harness run`` writes, held against strict readers, for every outcome.

Real runs of tests/data/suites/outcomes (pass, fail, setup and teardown errors, skip,
xfail, strict XPASS, a module that fails to import), then the same suite crashing, hanging
past its step timeout (alone and under xdist) and cancelled: every JUnit file and
merged.xml must validate against junit-10.xsd (the xunit2 schema pytest tests its own
JUnit with, fetched from the package registry: tests/junit_schema.py), their counts must
be the cases they hold (as junitparser counts), and the history must still find each
case's node id and properties in the JUnit file's sidecar.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from junit_schema import count_problems, junit_xsd, schema_errors

from harness.history import ingest_paths
from harness.repro.pick import read_suite
from harness.results.junit_read import read_junit
from harness.results.sidecar import address
from harness.roots import project_root

ROOT = project_root()
SUITE = "tests/data/suites/outcomes"
MODULE = f"{SUITE}/check_outcomes.py"
STOPPER = f"{MODULE}::test_stops_the_suite[shape1]"
AFTER = f"{MODULE}::TestAfter::test_never_runs_after_a_stop"


@pytest.fixture(scope="module")
def xsd(shared_cache: Path) -> Path:
    return junit_xsd(shared_cache)


def write_matrix(folder: Path, workers: int = 1, timeout_s: int = 60) -> Path:
    path = folder / "outcomes.yaml"
    path.write_text(
        "extends: cpu.yaml\nname: outcomes\nsuites:\n"
        f"  outcomes: {{path: {SUITE}, workers: {workers}, timeout_s: {timeout_s}, "
        'enabled: true, pytest_args: ["-o", "python_files=check_*.py"]}\n'
    )
    return path


def command(tmp_path: Path, workers: int = 1, timeout_s: int = 60) -> list[str]:
    return [sys.executable, "-m", "harness", "run", "--matrix",
            str(write_matrix(tmp_path, workers, timeout_s)), "--suite", "outcomes",
            "--python", "current", "--reports", str(tmp_path / "reports")]


def environment(mode: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    return env | {"OUTCOMES_MODE": mode}


def run(tmp_path: Path, mode: str, workers: int = 1, timeout_s: int = 60) -> Path:
    done = subprocess.run(command(tmp_path, workers, timeout_s), cwd=ROOT, env=environment(mode),
                          capture_output=True, text=True, timeout=600, check=False)
    # 1: tests failed, 3: infrastructure (a hang), 4: a test process that crashed itself
    assert done.returncode in (1, 3, 4), done.stdout[-3000:] + done.stderr[-2000:]
    (folder,) = (tmp_path / "reports" / "outcomes").iterdir()
    return folder


def strict_readers_accept(xsd: Path, folder: Path) -> None:
    files = [*sorted((folder / "junit").glob("*.xml")), folder / "merged.xml"]
    problems = [line for path in files for line in schema_errors(xsd, path)]
    problems += [line for path in files for line in count_problems(path)]
    assert problems == []
    merged = ET.parse(folder / "merged.xml").getroot()
    assert merged.get("tests") == str(sum(1 for _ in merged.iter("testcase")))
    assert merged.get("failures") == str(len(merged.findall("./testsuite/testcase/failure")))


def results(folder: Path) -> dict[str, tuple[str, str]]:
    """node id -> (result element or "passed", its message), read plainly; a case's node
    id is the sidecar's line at its address (the harness's own case too:
    ``harness.<suite>::<its name>``)."""
    side = {}
    for line in (folder / "junit" / "outcomes.partial.jsonl").read_text().splitlines():
        nodeid = json.loads(line)["nodeid"]
        side[address(nodeid)] = nodeid
    out = {}
    for case in ET.parse(folder / "junit" / "outcomes.xml").getroot().iter("testcase"):
        child = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        name = case.get("name", "")
        nodeid = side.get((case.get("classname", ""), name), name)
        out[nodeid] = ("passed", "") if child is None else (child.tag, child.get("message", ""))
    return out


def test_every_outcome_is_valid_xunit2_and_ingests_with_its_properties(
    xsd: Path, tmp_path: Path
) -> None:
    folder = run(tmp_path, "all")
    strict_readers_accept(xsd, folder)
    junit = (folder / "junit" / "outcomes.xml").read_text()
    assert "<properties>" not in junit.split("</properties>", 1)[1]  # none per case
    got = {nodeid: tag for nodeid, (tag, _) in results(folder).items()}
    assert got == {
        f"{SUITE}/check_import_error.py": "error",
        f"{MODULE}::test_passes": "passed", f"{MODULE}::test_fails": "failure",
        f"{MODULE}::test_errors_in_setup": "error", f"{MODULE}::test_errors_in_teardown": "error",
        f"{MODULE}::test_skips": "skipped", f"{MODULE}::test_expected_failure": "skipped",
        f"{MODULE}::test_strict_xpass": "failure", f"{MODULE}::test_stops_the_suite[shape0]":
        "passed", STOPPER: "passed", AFTER: "passed",
    }  # fmt: skip
    db = tmp_path / "history.sqlite"
    ingest_paths(db, [folder], pytest.fail)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT t.nodeid, c.status, c.op, c.headroom, c.extra FROM cases c"
                            " JOIN tests t ON t.id = c.test").fetchall()
    stored = {nodeid: (status, op, headroom, extra) for nodeid, status, op, headroom, extra in rows}
    assert set(stored) == set(got)  # pytest's node ids, from the sidecar, never rebuilt
    # its columns, and in `extra` at most the test process's peak memory (plugin/memory.py:
    # on a test that raised its file's peak in its process)
    status, op, headroom, extra = stored[f"{MODULE}::test_passes"]
    assert (status, op, headroom) == ("passed", "rms_norm", 0.25)
    assert extra is None or set(json.loads(extra)) == {"peak_rss_mb"}
    peaks = [float(json.loads(e)["peak_rss_mb"]) for *_, e in stored.values() if e]
    assert peaks and min(peaks) > 20
    assert stored[f"{MODULE}::test_fails"][:2] == ("failed", "linear")
    assert stored[f"{MODULE}::test_strict_xpass"][0] == "xpass"
    assert stored[f"{MODULE}::test_expected_failure"][0] == "xfail"
    repro = read_suite(folder / "junit" / "outcomes.xml", ROOT)
    assert set(repro.failed) == {f"{SUITE}/check_import_error.py", f"{MODULE}::test_fails",
                                 f"{MODULE}::test_errors_in_setup",
                                 f"{MODULE}::test_errors_in_teardown",
                                 f"{MODULE}::test_strict_xpass"}


def _stopped(folder: Path, how: str, said: str, *, after_may_run: bool = False) -> dict[str, Any]:
    manifest = json.loads((folder / "manifest.json").read_text())
    (suite,) = manifest["suites"]
    got = results(folder)
    progress = (folder / "junit" / "outcomes.progress.jsonl").read_text().splitlines()
    collected = json.loads(progress[0])["collected"]
    assert len(collected) == 10 and set(collected) <= set(got)  # every test is a case
    assert got[STOPPER][0] == "error" and got[STOPPER][1].endswith("while this test ran")
    not_run = ("skipped", f"not run: the suite {how} in {STOPPER}")
    # Under xdist the test after the stop runs on the other worker unless xdist had already
    # queued it behind the stopped test on the same worker (its scheduler decides).
    assert got[AFTER] in ({("passed", ""), not_run} if after_may_run else {not_run})
    # the harness's own case has a sidecar line too (with the cause it records)
    harness_case = next(v for k, v in got.items() if k.startswith("harness.outcomes::outcomes: "))
    assert harness_case[0] == "error" and harness_case[1].endswith(f" in {STOPPER}")
    assert said in harness_case[1] and suite["reason"].endswith(f" in {STOPPER}")
    # the tests never run are not skips of the suite's own
    assert suite["skip_reasons"] == [{"reason": "needs fp8_e4m3fnuz", "count": 1}]
    return dict(suite)


def test_a_suite_killed_while_its_junit_is_written_merges_as_valid_xml(
        xsd: Path, tmp_path: Path) -> None:
    """The file on disk stays cut (the run's own error case could not be added to it);
    merged.xml has every case read before the damage and an error case naming it."""
    folder = run(tmp_path, "cut")
    cut = folder / "junit" / "outcomes.xml"
    with pytest.raises(ET.ParseError):
        ET.parse(cut)
    problems = schema_errors(xsd, folder / "merged.xml") + count_problems(folder / "merged.xml")
    assert problems == []
    merged = ET.parse(folder / "merged.xml").getroot()
    cases = {case.get("name", ""): case for case in merged.iter("testcase")}
    assert "test_passes" in cases and len(cases) > 5
    damage = cases["outcomes.xml: cut mid-write"].find("error")
    assert damage is not None and "does not parse" in damage.get("message", "")
    assert merged.get("tests") == str(len(list(merged.iter("testcase"))))


def test_a_crash_names_the_test_and_lists_what_never_ran(xsd: Path, tmp_path: Path) -> None:
    folder = run(tmp_path, "crash")
    strict_readers_accept(xsd, folder)
    suite = _stopped(folder, "crashed", "crashed: killed by SIGABRT")
    assert suite["status"] == "crashed"
    suite_el = ET.parse(folder / "junit" / "outcomes.xml").getroot().find("testsuite")
    assert suite_el is not None
    props = {p.get("name"): p.get("value") for p in suite_el.iter("property")}
    assert props["matrix"] == "outcomes" and suite_el.get("timestamp")


def test_a_crash_under_xdist_is_the_test_s_error(xsd: Path, tmp_path: Path) -> None:
    """xdist replaces a worker that dies and reports the test it ran as an error, without a
    teardown: the sidecar still has the test's line, so the case keeps its node id."""
    folder = run(tmp_path, "crash", workers=2)
    strict_readers_accept(xsd, folder)
    cases, _ = read_junit(folder / "junit" / "outcomes.xml", pytest.fail)
    by_id = {case.nodeid: case for case in cases}
    assert by_id[STOPPER].status in ("failed", "error") and "crashed" in by_id[STOPPER].message
    assert by_id[STOPPER].properties["nodeid"] == STOPPER  # joined, not rebuilt
    assert by_id[AFTER].status == "passed"


# (xdist workers take seconds to start on a busy machine: a longer step timeout there)
@pytest.mark.parametrize(("workers", "timeout_s"), [(1, 20), (2, 60)])
def test_a_hang_names_the_test_that_hung(
    xsd: Path, tmp_path: Path, workers: int, timeout_s: int
) -> None:
    folder = run(tmp_path, "hang", workers=workers, timeout_s=timeout_s)
    strict_readers_accept(xsd, folder)
    suite = _stopped(folder, "timed out", f"timeout: step ran past {timeout_s} s",
                     after_may_run=workers > 1)
    assert suite["status"] == "timeout"


def test_a_cancel_keeps_pytest_s_file_valid_with_the_cases_added(
    xsd: Path, tmp_path: Path
) -> None:
    proc = subprocess.Popen(command(tmp_path, timeout_s=300), cwd=ROOT,
                            env=environment("hang"), text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    started, waiting = "", json.dumps({"started": STOPPER})
    while waiting not in started and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        progress = list((tmp_path / "reports").glob("outcomes/*/junit/outcomes.progress.jsonl"))
        started = progress[0].read_text() if progress else ""
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    (folder,) = (tmp_path / "reports" / "outcomes").iterdir()
    strict_readers_accept(xsd, folder)
    suite = _stopped(folder, "was interrupted", "cancelled (SIGTERM)")
    assert suite["status"] == "interrupted"
