"""harness.process.run's short-command helpers, on real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.process.run import run_attached, run_captured
from tests.processes import running


def test_run_captured_reads_both_streams_and_the_exit_code(tmp_path: Path) -> None:
    done = run_captured([sys.executable, "-c", "import sys; print('out'); "
                         "print('err', file=sys.stderr); sys.exit(3)"], timeout_s=30,
                        cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def test_run_captured_stops_the_whole_tree_at_the_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = f"sleep 60 & echo $! > {pidfile}; wait"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_captured(["sh", "-c", script], timeout_s=1)
    assert time.monotonic() - started < 15
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while running(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(grandchild), "the background sleep outlived its group"


def test_run_captured_lets_a_missing_program_raise() -> None:
    with pytest.raises(OSError):
        run_captured(["/nonexistent/program"], timeout_s=5)


def test_run_attached_returns_the_exit_code() -> None:
    assert run_attached([sys.executable, "-c", "raise SystemExit(7)"], env=os.environ) == 7
