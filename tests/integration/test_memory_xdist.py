"""The worker budget's xdist scheduler (plugin/memory.py) in a real pytest-xdist session,
without ``harness run`` around it: pytest with the harness plugin, ``-n 2``, the options a
run hands a suite (``--harness-memory-mb``, ``--harness-test-memory``, ``--harness-partial``),
over suites whose tests hold real resident memory. Each scenario a few seconds: a worker
over its share restarted, a test that held more than a share retiring its worker, a test
the history says would not fit restarting its worker before it, a suite that groups its
tests itself (``--dist loadfile``) left as it is; the lines each says, and nothing lost.
(tests/integration/test_memory_budget.py runs the same through ``harness run``.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(),
                                reason="the peak per test needs Linux's clear_refs")
BUDGET_MB = 400  # 200 MB a worker of two; a worker without torch holds about 40 MB
HOLDS = """
import time
import pytest

HELD = []


def hold(mb, keep=True):
    block = bytearray(int(mb * 1024 * 1024))
    for at in range(0, len(block), 4096):  # touched: resident, not only reserved
        block[at] = 1
    if keep:
        HELD.append(block)
    time.sleep(0.3)  # a kernel case's time: the controller's answer lands before the next


def alive_beside(pids_file):
    import os
    from pathlib import Path

    seen = set(int(x) for x in pids_file.read_text().split()) if pids_file.exists() else set()
    others = []
    for pid in seen - {os.getpid()}:
        try:
            if "State:\\tZ" not in Path(f"/proc/{pid}/status").read_text():
                others.append(pid)
        except OSError:
            pass
    with pids_file.open("a") as out:
        out.write(f"{os.getpid()}\\n")
    return others
"""


def run(folder: Path, body: str, *args: str, needs: dict[str, float] | None = None
        ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, object]]]:
    (folder / "test_held.py").write_text(textwrap.dedent(HOLDS) + textwrap.dedent(body))
    extra = []
    if needs is not None:
        (folder / "needs.json").write_text(json.dumps(
            {"held": {"tests": needs, "heaviest_mb": max(needs.values())}}))
        extra = ["--harness-test-memory", str(folder / "needs.json")]
    partial = folder / "partial.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-q",
         "-o", "junit_suite_name=held", "--harness-partial", str(partial),
         "--harness-memory-mb", str(BUDGET_MB), *extra, *args, "test_held.py"],
        cwd=folder, capture_output=True, text=True, timeout=300, check=False)
    lines = [json.loads(x) for x in partial.read_text().splitlines()] if partial.exists() else []
    return done, lines


def said(done: subprocess.CompletedProcess[str]) -> list[str]:
    """harness's lines, after pytest's progress dots on the same line."""
    return [line[line.index("harness: "):] for line in done.stdout.splitlines()
            if "harness: " in line]


GROWING = """
from pathlib import Path


@pytest.mark.parametrize("i", range(16))
def test_grows(i):
    hold(60)
    assert len(alive_beside(Path(__file__).with_name("pids.txt"))) <= 1
"""


def test_a_worker_over_its_share_is_restarted_and_its_process_ends(tmp_path: Path) -> None:
    done, lines = run(tmp_path, GROWING)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    restarts = [x for x in said(done) if "restarted between tests as gw" in x]
    assert restarts, done.stdout
    for line in restarts:
        assert re.fullmatch(r"harness: worker gw\d restarted between tests as gw\d+: \d+ MB "
                            r"resident after test_held\.py::test_grows\[\d+\], over the 200 MB "
                            r"a worker may use", line), line
        # the report that first took it over (three tests' 60 MB), not a later one's
        assert 200 < int(line.split(": ")[2].split()[0]) < 200 + 60, line
    assert said(done)[-1] == (f"harness: {len(restarts)} worker restart(s) or stop(s) for "
                              f"memory (the suite's budget {BUDGET_MB} MB)")
    # nothing lost or run twice
    assert sorted(x["nodeid"] for x in lines) == sorted(
        f"test_held.py::test_grows[{i}]" for i in range(16))
    assert all(x["outcome"] == "passed" for x in lines)
    peaks = [float(str(x["properties"]["peak_rss_mb"])) for x in lines
             if "peak_rss_mb" in x["properties"]]  # type: ignore[operator]
    # a worker drained after its third test (over 200 MB) runs the test it is running and the
    # one it holds as next, no more: five tests' 60 MB over a fresh worker's (8 untended)
    assert peaks and max(peaks) <= min(peaks) + 4 * 60 + 10, peaks
    runs = [line.split()[0] for line in (tmp_path / "pids.txt").read_text().splitlines()]
    assert max(runs.count(pid) for pid in set(runs)) <= 5, runs


def test_a_suite_that_groups_its_own_tests_is_left_to_xdist(tmp_path: Path) -> None:
    done, lines = run(tmp_path, GROWING.replace("<= 1", "<= 9"), "--dist", "loadfile")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert said(done) == [] and len(lines) == 16


def test_a_test_that_held_more_than_a_share_stops_its_worker(tmp_path: Path) -> None:
    done, lines = run(tmp_path, """
        @pytest.mark.parametrize("i", range(12))
        def test_once_large(i):
            hold(250 if i in (2, 8) else 1, keep=False)
        """)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    stops = [x for x in said(done) if "stopped between tests" in x]
    assert len(stops) == 1, said(done)  # the last worker left is never stopped
    assert re.fullmatch(r"harness: worker gw\d stopped between tests: test_held\.py::"
                        r"test_once_large\[[28]\] held \d+ MB while it ran, over the 200 MB a "
                        r"worker may use: the suite goes on with 1 worker\(s\)", stops[0]), stops
    assert not any("restarted" in x for x in said(done))
    assert len(lines) == 12 and all(x["outcome"] == "passed" for x in lines)


def test_a_test_the_history_says_would_not_fit_restarts_its_worker_before_it(
        tmp_path: Path) -> None:
    """Each test keeps 30 MB; the history says the last ones need 120 MB: beside what a
    worker holds after a few tests that is over its share, in a fresh worker it is not."""
    late = {f"test_held.py::test_step[{i}]": 120.0 for i in range(8, 16)}
    done, lines = run(tmp_path, """
        @pytest.mark.parametrize("i", range(16))
        def test_step(i):
            hold(30)
        """, needs=late)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    before = [x for x in said(done) if ": its test " in x]
    assert before, done.stdout
    assert all(re.fullmatch(r"harness: worker gw\d+ restarted between tests as gw\d+: its test "
                            r"test_held\.py::test_step\[(8|9|1[0-5])\] needs 120 MB beside the "
                            r"\d+ MB it holds, over the 200 MB a worker may use", x)
               for x in before), before
    assert len(lines) == 16 and all(x["outcome"] == "passed" for x in lines)
