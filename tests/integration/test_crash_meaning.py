"""One meaning per failure, end to end: a test process that aborts itself on a CPU lane is
``crashed`` (a finding, exit 4) for the suite and for every case the harness wrote, in
the manifest and the sidecar, and a finding in the history and the nightly report (no
infrastructure label: its cases count with the suite's failures); on a GPU lane the
same abort is a GPU hang everywhere (real ``harness run``).

The cases' messages say "SIGABRT", which the history's regexes read as a GPU hang (an
infrastructure failure): only the cause the harness recorded on each case tells them
apart."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from harness.history import ingest_paths
from harness.results.cause import CAUSE_PROPERTY, Cause, CauseRecord
from harness.results.manifest import RunRecord
from harness.roots import project_root
from tests.runs import own_suites_matrix

ROOT = project_root()

SUITE = """
import os

def test_before():
    assert True

def test_aborts():
    os.abort()

def test_after():
    assert True
"""


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)


def aborting_run(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    suite = tmp_path / "aborting"
    suite.mkdir()
    (suite / "test_aborting.py").write_text(textwrap.dedent(SUITE))
    matrix = own_suites_matrix(tmp_path / "aborts.yaml", "aborts",
                               [f"  aborting: {{path: {suite}, workers: 1, timeout_s: 300}}"])
    reports = tmp_path / "reports"
    done = harness("run", "--matrix", str(matrix), "--python", "current", "--local",
                   "--reports", str(reports))
    (run_dir,) = (reports / "aborts").iterdir()
    return done, run_dir


def test_an_abort_on_a_cpu_lane_is_crashed_for_the_suite_and_its_cases(tmp_path: Path) -> None:
    done, run_dir = aborting_run(tmp_path)
    reports = run_dir.parent.parent
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-2000:]

    # the manifest: the suite crashed of its own SIGABRT, a finding
    record = RunRecord.read(run_dir)
    assert (record.status, record.exit_code) == ("crashed", 4)
    (outcome,) = record.suites
    assert outcome.status.value == "crashed"
    assert outcome.cause == CauseRecord(cause=Cause.SIGNAL, signal="SIGABRT", exit_code=-6)

    # the sidecar: each case the harness wrote records the same cause
    lines = [json.loads(line) for line in
             (run_dir / "junit" / "aborting.partial.jsonl").read_text().splitlines()]
    written = {line["nodeid"].rpartition("::")[2]: line["properties"].get(CAUSE_PROPERTY)
               for line in lines if line["when"] == "running"}
    assert written == {"test_aborts": "signal:SIGABRT",
                       "aborting: crashed: killed by SIGABRT (exit -6)": "signal:SIGABRT"}
    messages = " ".join(line["message"] for line in lines if line["when"] == "running")
    assert "SIGABRT" in messages  # what the regexes would have named a GPU hang

    # the history and the nightly report: a finding, as the exit code says: no
    # infrastructure label on the run, the suite or any case (never gpu-hang, which
    # the messages' "SIGABRT" would read as), the suite failed in the report's grid
    report = one_label(tmp_path, reports, None)
    (cell,) = (c for c in report["suite_grid"]
               if (c["lane"], c["suite"]) == ("aborts", "aborting"))
    assert cell["state"] == "failed" and "crashed: killed by SIGABRT" in cell["reason"]
    # test_before passed, test_aborts and the suite's own case are errors, test_after
    # never ran
    assert cell["counts"] == {"passed": 1, "error": 2, "skipped": 1}


def one_label(tmp_path: Path, reports: Path, label: str | None) -> dict[str, Any]:
    """The run, its suite and both cases the harness wrote carry ``label`` in the
    history (None: none, a finding), and the nightly report's infrastructure events at each
    scope say it too (none for a finding); the report's JSON."""
    db = tmp_path / "history.sqlite"
    ingest_paths(db, [reports], pytest.fail)
    with sqlite3.connect(db) as conn:
        (run_sig,) = conn.execute("SELECT infra_label FROM runs").fetchone()
        (suite_sig,) = conn.execute("SELECT infra_label FROM suites").fetchone()
        cases = dict(conn.execute(
            "SELECT t.nodeid, c.infra_label FROM cases c JOIN tests t ON t.id = c.test"
            " WHERE c.status = 'error'").fetchall())
    assert run_sig == suite_sig == label
    assert len(cases) == 2 and set(cases.values()) == {label}, cases
    out = tmp_path / "report"
    done = harness("report", "nightly", "--history", str(db), "--out", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    by_scope = {(e["scope"], e["label"]) for e in report["infra"]}
    expected = ({(scope, label) for scope in ("run", "suite", "case")} if label
                else set())
    assert by_scope == expected, by_scope
    return report


def test_an_abort_on_a_gpu_lane_is_a_gpu_hang_for_the_run_its_suite_and_cases(
        tmp_path: Path) -> None:
    """The same abort on a GPU lane (the probe found the GPU): infrastructure, one meaning
    everywhere: exit 3, retried by CI, ``gpu-hang`` for the run, the suite and every case
    the harness wrote, in the history and the report. No GPU here: the run folder is the
    CPU lane's, with the device fingerprint a GPU lane's probe records (the real probe on
    a captured nvidia-smi answer) and the lane not emulated, as that lane writes it."""
    from harness.platform import probe
    from harness.results.cause import RETRIED_EXIT_CODES, meaning_of

    _, run_dir = aborting_run(tmp_path)
    capture = (ROOT / "tests" / "data" / "probe" / "nvidia-smi.csv").read_text()
    fingerprint = probe.probe("nvidia-smi", {"min_devices": 1}, lambda argv: (0, capture))
    manifest = run_dir / "manifest.json"
    data = json.loads(manifest.read_text())
    data["emulate"], data["device_fingerprint"] = False, dict(fingerprint.data)
    manifest.write_text(json.dumps(data))
    record = RunRecord.read(run_dir)
    assert record.on_gpu
    (outcome,) = record.suites
    assert outcome.cause is not None
    meaning = meaning_of(outcome.cause, gpu=True)
    assert (meaning.exit_code, meaning.retried, meaning.finding) == (3, True, False)
    assert meaning.exit_code in RETRIED_EXIT_CODES

    one_label(tmp_path, run_dir.parent.parent, "gpu-hang")
