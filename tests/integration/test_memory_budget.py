"""Workers within memory, end to end through `harness run` (real pytest-xdist workers, real
resident memory): each test's peak recorded in the sidecar, the manifest and the history; a
worker that grows past its share restarted between tests with nothing lost; the worker count
following a small memory limit; a suite whose test cannot fit refused before it runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.history.read import recent_suite_peaks, recent_worker_needs
from harness.results.layout import Lane
from harness.results.manifest import RunRecord
from harness.roots import project_root
from tests.runs import own_suites_matrix

ROOT = project_root()
MB = 60  # each test keeps this much more resident than the one before it, in its worker
TESTS = 12

SUITE = f"""
import os
import time
from pathlib import Path

import pytest

HELD = []


def alive(pid):  # a zombie (exited, not yet reaped by its parent) holds no memory
    try:
        status = Path(f"/proc/{{pid}}/status").read_text()
    except OSError:
        return False
    return "State:\\tZ" not in status


@pytest.mark.parametrize("i", range({TESTS}))
def test_grows(i):
    block = bytearray({MB} * 1024 * 1024)
    for at in range(0, len(block), 4096):  # touched: resident, not only reserved
        block[at] = 1
    HELD.append(block)
    time.sleep(0.3)  # a kernel case's time: the controller's drain lands before the next test
    # Which test processes seen so far still live beside this one ("PIDS": a file the
    # test reads after the run): a worker restarted for memory must be gone, not idle.
    pids = Path(__file__).with_name("pids.txt")
    seen = {{int(line.split()[0]) for line in pids.read_text().splitlines()}} \
        if pids.exists() else set()
    others = sorted(p for p in seen - {{os.getpid()}} if alive(p))
    with pids.open("a") as out:
        out.write(f"{{os.getpid()}} {{len(others)}}\\n")
"""


def harness(tmp_path: Path, *args: str, limit: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"HARNESS_MEMORY_LIMIT": limit,
                        "HARNESS_HISTORY": str(tmp_path / "history.sqlite")}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    suite = tmp_path / "growing"
    suite.mkdir()
    (suite / "test_growing.py").write_text(textwrap.dedent(SUITE))
    return own_suites_matrix(tmp_path / "grows.yaml", "grows",
                             [f"  growing: {{path: {suite}, workers: auto, timeout_s: 300}}"])


def suite_matrix(tmp_path: Path, name: str, text: str) -> tuple[Path, Path]:
    """A suite of one file, ``text``, and the matrix whose one suite it is."""
    suite = tmp_path / name
    suite.mkdir()
    (suite / f"test_{name}.py").write_text(textwrap.dedent(text))
    return suite, own_suites_matrix(tmp_path / "grows.yaml", "grows", [
        f"  {name}: {{path: {suite}, workers: auto, timeout_s: 300}}"])


def run(tmp_path: Path, matrix: Path, limit: str, *extra: str
        ) -> tuple[subprocess.CompletedProcess[str], Path | None]:
    reports = tmp_path / "reports"
    before = set((reports / "grows").iterdir()) if (reports / "grows").is_dir() else set()
    done = harness(tmp_path, "run", "--matrix", str(matrix), "--python", "current", "--local",
                   "--reports", str(reports), *extra, limit=limit)
    after = set((reports / "grows").iterdir()) if (reports / "grows").is_dir() else set()
    new = sorted(after - before)
    return done, (new[0] if new else None)


def test_a_worker_over_its_share_is_restarted_between_tests(tmp_path: Path,
                                                            matrix: Path) -> None:
    # 2 workers in 600 MB: 300 MB each; a worker holds its interpreter, torch and the
    # plugin (about 235 MB) and 60 MB more for each test it ran, so each passes its share
    # after its second test of the six it would run.
    done, run_dir = run(tmp_path, matrix, "600M", "--workers", "2")
    said = done.stdout + done.stderr
    assert done.returncode == 0 and run_dir is not None, said[-3000:]
    assert "restarted between tests" in said, said[-3000:]
    assert "over the 300 MB a worker may use" in said
    # Each restarted worker's process ended: a test never saw more than the one other worker
    # alive beside it (xdist alone keeps a finished worker's process until the session ends).
    pids = [line.split() for line in (matrix.parent / "growing" / "pids.txt").read_text()
            .splitlines()]
    assert len({pid for pid, _ in pids}) > 2 and max(int(n) for _, n in pids) <= 1, pids

    record = RunRecord.read(run_dir)
    (suite,) = record.suites
    # nothing lost: every test ran once and passed, no crash, no error case
    assert suite.counts.passed == TESTS and suite.counts.failed == suite.counts.error == 0
    assert record.threads.memory_mb == 600 and record.threads.memory_source == \
        "HARNESS_MEMORY_LIMIT"
    # each test's peak in the sidecar, the suite's in the manifest; below what a worker
    # running its six tests would reach: a drained worker runs the test it is running and
    # the one it holds as next (xdist's worker needs it to tear down), then restarts
    lines = [json.loads(x) for x in (run_dir / "junit" / "growing.partial.jsonl")
             .read_text().splitlines()]
    peaks = [float(x["properties"]["peak_rss_mb"]) for x in lines]
    assert len(peaks) == TESTS and min(peaks) > MB
    assert suite.peak_rss_mb == max(peaks) and suite.peak_test.startswith("test_growing.py::")
    assert max(peaks) < min(peaks) + (TESTS / 2 - 1) * MB


def test_the_worker_count_follows_the_memory_limit(tmp_path: Path, matrix: Path) -> None:
    done, run_dir = run(tmp_path, matrix, "600M", "--workers", "2")
    assert done.returncode == 0 and run_dir is not None, (done.stdout + done.stderr)[-3000:]
    ingest = harness(tmp_path, "history", "ingest", str(run_dir), limit="600M")
    assert ingest.returncode == 0, ingest.stderr
    db, lane = tmp_path / "history.sqlite", Lane(matrix="grows")
    (peak,) = recent_suite_peaks(db, lane)
    assert peak.suite == "growing" and peak.mb == RunRecord.read(run_dir).suites[0].peak_rss_mb
    # What a worker needs: a fresh one (its interpreter, torch, the plugin) and the heaviest
    # test's growth (each test's 60 MB), less than the peak of a worker that kept some.
    (need,) = recent_worker_needs(db, lane)
    assert need.suite == "growing" and MB <= need.heaviest_mb < MB + 20, need
    assert need.mb < peak.mb - MB / 2, (need, peak)

    # Room for two workers at what a worker needs (not at the peak): two, each restarted
    # before a test that would take it over its share.
    limit = int(need.mb * 2.8)
    done, run_dir = run(tmp_path, matrix, f"{limit}M", "--workers", "2")
    said = done.stdout + done.stderr
    assert done.returncode == 0 and run_dir is not None, said[-3000:]
    assert "worker(s), not 2" not in said and "restarted between tests" in said, said[-3000:]
    assert f"-n 2 --harness-memory-mb={limit} " in (run_dir / "logs" / "growing.log").read_text()
    assert RunRecord.read(run_dir).suites[0].counts.passed == TESTS

    # Room for one: one worker, and the run says why; its peak over half the budget, that
    # worker is xdist's, handed the whole budget (the plugin keeps it within keep_mb,
    # test_a_lone_worker_... below).
    limit = int(need.mb * 1.5)
    done, run_dir = run(tmp_path, matrix, f"{limit}M", "--workers", "2")
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert (f"suite growing: 1 worker(s), not 2: a worker needs {need.mb:.0f} MB a worker (a "
            f"fresh worker's {need.start_mb:.0f} MB and its heaviest test's growth, "
            f"{need.heaviest_mb:.0f} MB, in this lane's history)") in said, said[-3000:]
    assert run_dir is not None
    log = (run_dir / "logs" / "growing.log").read_text()
    assert f"-n 1 --harness-memory-mb={limit} --harness-test-memory=" in log
    assert RunRecord.read(run_dir).suites[0].counts.passed == TESTS

    # Less than a fresh worker and one test: one infrastructure line, nothing run.
    done, run_dir = run(tmp_path, matrix, f"{int(need.mb * 0.8)}M")
    said = done.stdout + done.stderr
    assert done.returncode == 3, said[-3000:]
    assert f"suite growing: a worker needs {need.mb:.0f} MB (a fresh worker's" in said
    assert "it cannot fit here" in said and "Traceback" not in said


def test_the_matrix_s_peak_plans_a_first_run_the_history_the_next(tmp_path: Path) -> None:
    # A lane's first run knows its tests' memory only from the matrix (peak_memory_mb);
    # once it has run, its history's peak replaces the matrix's word.
    suite = tmp_path / "growing"
    suite.mkdir()
    (suite / "test_growing.py").write_text(textwrap.dedent(SUITE))
    matrix = own_suites_matrix(tmp_path / "grows.yaml", "grows", [
        f"  growing: {{path: {suite}, workers: auto, timeout_s: 300, peak_memory_mb: 2000}}"])
    done, first = run(tmp_path, matrix, "3000M", "--workers", "2")
    said = done.stdout + done.stderr
    assert done.returncode == 0 and first is not None, said[-3000:]
    assert ("suite growing: 1 worker(s), not 2: its tests peaked at 2.0 GB a worker (the "
            "matrix's peak_memory_mb), the memory budget is 2.9 GB (HARNESS_MEMORY_LIMIT)"
            ) in said
    assert harness(tmp_path, "history", "ingest", str(first), limit="3000M").returncode == 0
    peak = RunRecord.read(first).suites[0].peak_rss_mb
    assert peak is not None and peak < 1500, peak  # one process, its twelve tests' 720 MB

    done, again = run(tmp_path, matrix, "3000M", "--workers", "2")
    said = done.stdout + done.stderr
    assert done.returncode == 0 and again is not None, said[-3000:]
    assert "worker(s), not 2" not in said
    assert "-n 2 --harness-memory-mb=3000" in (again / "logs" / "growing.log").read_text()


ONE_BIG = f"""
import time

import pytest

HELD = []


def touched(mb):
    block = bytearray(mb * 1024 * 1024)
    for at in range(0, len(block), 4096):  # resident, not only reserved
        block[at] = 1
    return block


@pytest.mark.parametrize("i", range({2 * TESTS}))
def test_mostly_small(i):
    if i == 0:  # one test that alone needs more than a worker's share, then lets it go
        block = touched(400)
        del block
    else:  # the others each keep a little
        HELD.append(touched(8))
    time.sleep(0.3)
"""


def test_a_test_over_a_worker_s_share_leaves_the_suite_one_worker_fewer(
        tmp_path: Path) -> None:
    # 2 workers in 700 MB: 350 MB each. The big test alone peaks at about 235 + 400 MB:
    # restarting its worker would not help the next such test, so that worker stops
    # between tests and is not replaced; the other worker runs the rest, and, as a suite's
    # lone worker, keeps no more than leaves room for the heaviest test seen (700 - 400
    # MB): the 8 MB each test keeps take it over 300 MB before the end (it would never
    # reach the whole 700 MB), and it is restarted. Nothing lost.
    _suite, matrix = suite_matrix(tmp_path, "onebig", ONE_BIG)
    done, run_dir = run(tmp_path, matrix, "700M", "--workers", "2")
    said = done.stdout + done.stderr
    assert done.returncode == 0 and run_dir is not None, said[-3000:]
    assert "stopped between tests: test_onebig.py::test_mostly_small[0] held" in said
    assert "the suite goes on with 1 worker(s)" in said
    stop = said.index("the suite goes on with 1 worker(s)")
    assert "restarted between tests" in said[stop:], said[-3000:]
    kept = re.search(r"over the (\d+) MB a worker may use", said[stop:])
    assert kept is not None and 280 <= int(kept[1]) <= 300, said[stop:]  # 700 less 400-odd
    record = RunRecord.read(run_dir)
    (outcome,) = record.suites
    assert outcome.counts.passed == 2 * TESTS and outcome.counts.error == 0
    assert outcome.peak_test == "test_onebig.py::test_mostly_small[0]"


def test_a_lone_worker_that_keeps_what_its_tests_leave_is_restarted_too(
        tmp_path: Path, matrix: Path) -> None:
    # One worker (--workers 1), a memory budget of 1500 MB. The first run, without history,
    # runs it as plain pytest and records its peak (its process keeps 60 MB a test: about
    # 235 + 12 x 60 MB) and each test's growth (60 MB). With that peak over half the budget,
    # the next run gives the one worker xdist all the same, handed the whole budget and the
    # tests' growth; it is restarted between tests once it keeps more than keep_mb: half the
    # budget, the heaviest test's 60 MB leaving more room beside it than that.
    done, first = run(tmp_path, matrix, "1500M", "--workers", "1")
    assert done.returncode == 0 and first is not None, (done.stdout + done.stderr)[-3000:]
    assert "bringing up nodes" not in (first / "logs" / "growing.log").read_text()
    assert harness(tmp_path, "history", "ingest", str(first), limit="1500M").returncode == 0
    peak = RunRecord.read(first).suites[0].peak_rss_mb
    assert peak is not None and 750 < peak < 1500, peak

    done, again = run(tmp_path, matrix, "1500M", "--workers", "1")
    said = done.stdout + done.stderr
    assert done.returncode == 0 and again is not None, said[-3000:]
    log = (again / "logs" / "growing.log").read_text()
    needs = json.loads((again / "test-memory.json").read_text())["growing"]
    assert 60 <= needs["heaviest_mb"] < 80 and len(needs["tests"]) >= TESTS - 1, needs
    keep = "750"
    assert "-n 1 --harness-memory-mb=1500 --harness-test-memory=" in log
    assert "restarted between tests" in said and f"over the {keep} MB a worker may use" in said
    (suite,) = RunRecord.read(again).suites
    assert suite.counts.passed == TESTS and suite.counts.failed == suite.counts.error == 0


NEXT_BIG = """
import time
from pathlib import Path

import pytest

HELD = []


def touched(mb):
    block = bytearray(mb * 1024 * 1024)
    for at in range(0, len(block), 4096):  # resident, not only reserved
        block[at] = 1
    return block


@pytest.mark.parametrize("i", range(16))
def test_step(i):
    time.sleep(0.5)  # a kernel case's time, not a few ms: the controller keeps up with it
    if i % 8 == 7:  # the last of each worker's first eight: needs 300 MB, then lets it go
        del touched(300)[:]
    elif Path(__file__).with_name("keep").exists():  # the others each keep 50 MB
        HELD.append(touched(50))
"""


def test_a_worker_is_restarted_before_a_test_that_would_take_it_over_its_share(
        tmp_path: Path) -> None:
    # 2 workers in 1300 MB: 650 MB each. Each worker's eighth test needs 300 MB more while
    # it runs. The first run learns each test's growth (a fresh worker, about 235-300 MB,
    # and the 300 MB: two workers again). Then the other tests keep 50 MB each (a change in
    # the code under test): handed the growth from the history, the run restarts a worker
    # before its eighth test, where what it holds and the 300 MB would cross its share.
    suite, matrix = suite_matrix(tmp_path, "nextbig", NEXT_BIG)
    done, first = run(tmp_path, matrix, "1300M", "--workers", "2")
    said = done.stdout + done.stderr
    assert done.returncode == 0 and first is not None, said[-3000:]
    assert "its test" not in said
    assert harness(tmp_path, "history", "ingest", str(first), limit="1300M").returncode == 0
    (suite / "keep").touch()

    done, again = run(tmp_path, matrix, "1300M", "--workers", "2")
    said = done.stdout + done.stderr
    assert done.returncode == 0 and again is not None, said[-3000:]
    needs = json.loads((again / "test-memory.json").read_text())["nextbig"]["tests"]
    assert 290 <= needs["test_nextbig.py::test_step[7]"] < 340, needs
    assert re.search(r"restarted between tests as gw\d+: its test "
                     r"test_nextbig.py::test_step\[(7|15)\] needs \d+ MB beside the \d+ MB "
                     r"it holds, over the 650 MB a worker may use", said), said[-3000:]
    assert "worker(s), not 2" not in said
    # the 300 MB test did not run beside the 585 MB its first worker held by then (885 MB,
    # as without the rule; 993 MB where the worker ran ahead of the controller's steal): it
    # went back to the others, and ran where it fit beside what its worker held at a report,
    # plus the two tests that worker may still run before it (the one running, the one it
    # holds: 50 MB each): at most 650 - 300 + 100 + 300 MB
    lines = [json.loads(x) for x in (again / "junit" / "nextbig.partial.jsonl").read_text()
             .splitlines()]
    peaks = [float(x["properties"]["peak_rss_mb"]) for x in lines
             if "peak_rss_mb" in x["properties"]]
    assert peaks and max(peaks) < 800, peaks
    (outcome,) = RunRecord.read(again).suites
    assert outcome.counts.passed == 16 and outcome.counts.error == 0
