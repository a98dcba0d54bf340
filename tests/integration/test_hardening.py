"""Hardening with real processes: CI's cancel signals, full disks, concurrent first
builds and ingests, secrets (tests/data/suites/hardening/check_hardening.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from harness.history.schema import SCHEMA_VERSION
from harness.roots import project_root
from tests.processes import running

ROOT = project_root()
FIXTURE = "tests/data/suites/hardening/check_hardening.py"


def write_matrix(folder: Path, workers: int = 1) -> Path:
    path = folder / "hardening.yaml"
    path.write_text(
        "extends: cpu.yaml\n"
        "name: hardening\n"
        "suites:\n"
        f"  hardening: {{path: {FIXTURE}, workers: {workers}, timeout_s: 300, enabled: true}}\n"
    )
    return path


def harness_cmd(matrix: Path, reports: Path) -> list[str]:
    return [sys.executable, "-m", "harness", "run", "--matrix", str(matrix), "--suite",
            "hardening", "--python", "current", "--reports", str(reports)]


def only_run_dir(reports: Path) -> Path:
    (run_dir,) = (reports / "hardening").iterdir()
    return run_dir


def case_names(xml: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        out[case.get("name", "")] = kinds[0] if kinds else "passed"
    return out


def wait_for(path: Path, proc: subprocess.Popen[str], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"harness exited {proc.returncode} early:\n{out[-3000:]}\n{err[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the suite never reached the waiting test")
        time.sleep(0.2)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_ci_cancel_finishes_the_run_folder_and_leaves_no_process(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    marker = tmp_path / "waiting.pid"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env |= {"HARNESS_HARDENING": "wait", "HARNESS_HARDENING_MARKER": str(marker)}
    proc = subprocess.Popen(harness_cmd(write_matrix(tmp_path, workers=2), tmp_path / "r"),
                            cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    wait_for(marker, proc)
    worker = int(marker.read_text())
    time.sleep(1.0)  # the two quick tests finish on the other worker
    sent = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == code, out[-3000:] + err[-2000:]
    assert took < 15, f"took {took:.1f} s after {sig.name}"
    assert f"cancelled ({sig.name})" in err
    assert not running(worker), "the xdist worker outlived the run"
    run_dir = only_run_dir(tmp_path / "r")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "cancelled" and manifest["exit_code"] == code
    assert manifest["ended"]
    (suite,) = manifest["suites"]
    assert suite["status"] == "interrupted"
    # the reason names the test that was waiting when the cancel came
    assert suite["reason"].startswith(f"cancelled ({sig.name}) in ")
    assert "check_hardening.py::test_waits_for_the_signal" in suite["reason"]
    cases = case_names(run_dir / "merged.xml")
    assert cases["test_first"] == "passed" and cases["test_second"] == "passed"
    assert cases[f"hardening: cancelled ({sig.name})"] == "error"
    assert "" not in cases, "the interrupted test became a nameless case (counted as passed)"
    assert not (run_dir / ".harness-reserve").exists()
    # Nothing writes to the run folder afterwards (no orphan finishing its JUnit).
    before = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")}
    time.sleep(3)
    assert {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")} == before


@pytest.fixture(scope="module")
def passed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder `harness run` wrote (the hardening suite, every test passing)."""
    folder = tmp_path_factory.mktemp("passed")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    done = subprocess.run(harness_cmd(write_matrix(folder), folder / "r"), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return only_run_dir(folder / "r")


def test_eight_concurrent_first_ingests_into_a_new_database_all_succeed(
    passed_run: Path, tmp_path: Path
) -> None:
    db = tmp_path / "new" / "history.sqlite"
    copies = []
    for i in range(8):  # eight runs: the same folder under eight run ids
        copy = tmp_path / f"run{i}"
        subprocess.run(["cp", "-r", str(passed_run), str(copy)], check=True)
        manifest = json.loads((copy / "manifest.json").read_text())
        manifest["run_id"] = f"{manifest['run_id']}-{i}"
        (copy / "manifest.json").write_text(json.dumps(manifest))
        copies.append(copy)
    procs = [subprocess.Popen([sys.executable, "-m", "harness", "history", "ingest", str(c),
                               "--db", str(db)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for c in copies]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    assert [r[0] for r in results] == [0] * 8, [r[2][-500:] for r in results if r[0]]
    import sqlite3

    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (8,)
        assert con.execute("SELECT version FROM schema_version").fetchall() == [
            (SCHEMA_VERSION,)]


@pytest.mark.timeout(900)  # two venv builds racing (each waited on for up to 900 s)
def test_two_concurrent_first_builds_of_one_environment_both_pass(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    matrix = tmp_path / "sharedenv.yaml"
    matrix.write_text(
        "extends: cpu.yaml\n"
        "name: sharedenv\n"
        "python: {requirements: [], python: '3.11'}\n"  # the runtime pins only: quick
        f"caches: {{root: '{cache}', tiktoken: false, hf: false}}\n"
        "suites:\n"
        f"  hardening: {{path: {FIXTURE}, workers: 1, timeout_s: 300, enabled: true}}\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    procs = [subprocess.Popen([sys.executable, "-m", "harness", "run", "--matrix", str(matrix),
                               "--suite", "hardening", "--reports", str(tmp_path / f"r{i}")],
                              cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
             for i in range(2)]
    results = [(p.wait(timeout=900), *p.communicate()) for p in procs]
    for code, out, err in results:
        assert code == 0, out[-3000:] + err[-2000:]
    (venv,) = [p for p in (cache / "venvs").iterdir() if p.is_dir()]
    assert (venv / ".harness-complete").is_file()
    assert sum("building the environment for sharedenv" in out for _, out, _ in results) == 1
    assert sum("waiting for another harness process" in err for _, _, err in results) == 1
    for i in range(2):
        manifest = json.loads((only_run_dir_of(tmp_path / f"r{i}", "sharedenv")
                               / "manifest.json").read_text())
        assert manifest["python"] == str(venv / "bin" / "python")


def only_run_dir_of(reports: Path, matrix: str) -> Path:
    (run_dir,) = (reports / matrix).iterdir()
    return run_dir


@pytest.fixture
def small_disk(tmp_path: Path) -> Path:
    """A 4 MB tmpfs (needs root, as in CI's container); unmounted afterwards."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_stops_the_run_with_exit_3_and_keeps_what_was_written(
    small_disk: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["HARNESS_HARDENING"] = "flood"  # about 40 MB through the log onto 4 MB
    start = time.monotonic()
    done = subprocess.run(harness_cmd(write_matrix(tmp_path), small_disk), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    took = time.monotonic() - start
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    assert took < 30, f"took {took:.1f} s"
    errors = [line for line in done.stderr.splitlines() if line.startswith("harness: error")]
    assert len(errors) == 1 and "No space left on device (ENOSPC)" in errors[0], done.stderr
    assert "Traceback" not in done.stderr
    run_dir = only_run_dir(small_disk)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "error" and manifest["exit_code"] == 3
    assert manifest["infra_error"]["kind"] == "write-failed"
    (suite,) = manifest["suites"]
    assert suite["status"] == "write-failed" and "hardening.log: No space left" in suite["reason"]
    assert suite["counts"]["passed"] == 2
    assert case_names(run_dir / "merged.xml")["test_first"] == "passed"
    cases = case_names(run_dir / "junit" / "hardening.xml")
    assert cases["test_first"] == "passed" and cases["test_second"] == "passed"
    assert (run_dir / "logs" / "hardening.log").stat().st_size > 1_000_000


def test_a_read_only_reports_folder_is_one_line_and_exit_3(tmp_path: Path) -> None:
    reports = tmp_path / "ro"
    reports.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(reports)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        run = subprocess.run(harness_cmd(write_matrix(tmp_path), reports), cwd=ROOT,
                             capture_output=True, text=True, timeout=120, check=False)
        report = subprocess.run([sys.executable, "-m", "harness", "report", "nightly",
                                 "--db", str(tmp_path / "none.sqlite"), "--out",
                                 str(reports / "out")], cwd=ROOT, capture_output=True,
                                text=True, timeout=120, check=False)
    finally:
        subprocess.run(["umount", "-l", str(reports)], check=False)
    assert run.returncode == 3, run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("harness: error: cannot write")
    assert "Read-only file system (EROFS)" in run.stderr and "Traceback" not in run.stderr
    assert report.returncode in (2, 3) and "Traceback" not in report.stderr, report.stderr


SECRET = "hf_S3cr3tV4lu3-do-not-leak"


def files_holding(folder: Path, needle: str) -> list[str]:
    return [str(p) for p in folder.rglob("*")
            if p.is_file() and needle.encode() in p.read_bytes()]


def test_a_secret_printed_by_a_test_is_in_no_file_nor_the_report(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env |= {"HARNESS_HARDENING": "secret", "HF_TOKEN": SECRET}
    done = subprocess.run(harness_cmd(write_matrix(tmp_path), tmp_path / "r"), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert "the token is ***" in done.stdout  # masked, not dropped
    assert SECRET not in done.stdout + done.stderr
    run_dir = only_run_dir(tmp_path / "r")
    assert files_holding(run_dir, SECRET) == []
    assert "token leaked: ***" in (run_dir / "merged.xml").read_text()
    db, out = tmp_path / "h.sqlite", tmp_path / "report"
    for argv in (["history", "ingest", str(run_dir), "--db", str(db)],
                 ["report", "nightly", "--db", str(db), "--out", str(out)]):
        step = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert step.returncode == 0, step.stdout[-2000:] + step.stderr[-2000:]
        assert SECRET not in step.stdout + step.stderr
    assert files_holding(out, SECRET) == [] and files_holding(tmp_path, SECRET) == []
    assert any(out.iterdir())


def _connect_at_once(db: str, barrier: Any, results: Any) -> None:
    from harness.history.schema import connect

    barrier.wait()
    try:
        connect(Path(db)).close()
        results.put("ok")
    except Exception as error:  # reported to the parent, which asserts on it
        results.put(f"{type(error).__name__}: {error}")


def test_eight_processes_opening_a_new_database_at_the_same_instant_all_succeed(
    tmp_path: Path,
) -> None:
    """The CLI's start-up staggers processes; a barrier makes the race certain."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    for attempt in range(3):
        db = tmp_path / f"new{attempt}" / "history.sqlite"
        db.parent.mkdir()
        barrier, results = ctx.Barrier(8), ctx.Queue()
        procs = [ctx.Process(target=_connect_at_once, args=(str(db), barrier, results))
                 for _ in range(8)]
        for p in procs:
            p.start()
        outcomes = [results.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert outcomes == ["ok"] * 8, outcomes
