"""CI's cancel signals against ``harness run --docker`` (real engine, the tiny image):
SIGTERM finishes the run folder and removes the container; a harness killed outright
leaves its container, which the next start reaps by its owner label."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from docker_helpers import ROOT, leftovers

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]  # container starts and kills
FIXTURE = "tests/data/suites/hardening/check_hardening.py"


def write_matrix(folder: Path, mode: str, marker: Path) -> Path:
    # Named like tests/docker's tiny matrix, with its pins: the tiny image is reused.
    path = folder / "dockertest.yaml"
    path.write_text(
        "extends: cpu.yaml\n"
        "name: dockertest\n"
        "python: {requirements: [], python: '3.11'}\n"
        "runtime:\n"
        "  docker: true\n"
        f"  env: {{HARNESS_HARDENING: {mode}, HARNESS_HARDENING_MARKER: '{marker}'}}\n"
        f"caches: {{root: '{folder / 'cache'}', tiktoken: false, hf: false}}\n"
        "probe: {kind: none}\n"
        "suites:\n"
        f"  hardening: {{path: {FIXTURE}, workers: 1, timeout_s: 300, enabled: true}}\n"
    )
    return path


def start(matrix: Path, reports: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    return subprocess.Popen(
        [sys.executable, "-m", "harness", "run", "--matrix", str(matrix), "--docker",
         "--suite", "hardening", "--reports", str(reports)],
        cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for(path: Path, proc: subprocess.Popen[str], seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"harness exited {proc.returncode} early:\n{out[-3000:]}\n{err[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the suite never reached the waiting test")
        time.sleep(0.2)


def gone_within(label: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while leftovers(label):
        if time.monotonic() > deadline:
            return False
        time.sleep(1)
    return True


@pytest.fixture
def folder(tiny_image: str, run_dir: Path) -> Path:
    (run_dir / "cache").mkdir()
    return run_dir


def test_sigterm_finishes_the_run_folder_and_removes_the_container(folder: Path) -> None:
    marker = folder / "cache" / "waiting.pid"
    proc = start(write_matrix(folder, "wait", marker), folder / "reports")
    wait_for(marker, proc)
    (run_dir,) = (folder / "reports" / "dockertest").iterdir()
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=90)
    took = time.monotonic() - sent
    assert proc.returncode == 143, out[-3000:] + err[-2000:]
    assert took < 20, f"took {took:.1f} s after SIGTERM"
    # Stopped at once; on vfs the engine may take a while more to delete its files.
    assert gone_within(f"org.harness.run={run_dir.name}", 120), "the container was left"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "cancelled" and manifest["exit_code"] == 143
    cases = {c.get("name"): [e.tag for e in c if e.tag != "properties"]
             for c in ET.parse(run_dir / "merged.xml").getroot().iter("testcase")}
    assert cases["test_first"] == [] and cases["test_second"] == []
    assert "error" in cases["hardening: cancelled (SIGTERM)"]
    assert "" not in cases, "the interrupted test became a nameless case (counted as passed)"
    # the test that was waiting when the signal came is an error of its own ("... while
    # this test ran"), beside the runner's case for the cancel
    waiting = [name for name, tags in cases.items()
               if "error" in tags and not str(name).startswith("hardening:")]
    assert len(waiting) == 1, cases
    counts = manifest["suites"][0]["counts"]
    assert (counts["passed"], counts["error"]) == (2, 2), counts


def test_a_killed_harness_leaves_a_container_the_next_start_reaps(folder: Path) -> None:
    marker = folder / "cache" / "waiting.pid"
    proc = start(write_matrix(folder, "wait", marker), folder / "reports")
    wait_for(marker, proc)
    (run_dir,) = (folder / "reports" / "dockertest").iterdir()
    proc.kill()
    proc.communicate(timeout=30)
    label = f"org.harness.run={run_dir.name}"
    assert leftovers(label) != "", "SIGKILL cannot clean up: the container must still be there"
    follow = start(write_matrix(folder, "none", marker), folder / "next")
    out, err = follow.communicate(timeout=600)
    assert follow.returncode == 0, out[-3000:] + err[-2000:]
    assert leftovers(label) == ""
    assert "the harness run that owned it is gone" in out


def test_a_secret_printed_in_the_container_is_in_no_file(folder: Path) -> None:
    secret = "hf_D0ck3rS3cr3t-do-not-leak"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"} | {"HF_TOKEN": secret}
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--matrix",
         str(write_matrix(folder, "secret", folder / "cache" / "unused")), "--docker",
         "--suite", "hardening", "--reports", str(folder / "reports")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert "the token is ***" in done.stdout and secret not in done.stdout + done.stderr
    leaks = [str(p) for p in (folder / "reports").rglob("*")
             if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaks == []
