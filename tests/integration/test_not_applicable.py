"""A suite the matrix declares not applicable (vllm-cpu's fusion: vLLM's CPU compile path
applies no fusion passes) is said once, with the reason, from the run to the report:
never a silent absence, never a suite of 0 tests, never a failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.matrix import load_matrix


def _harness(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "harness", *args], env=env, text=True,
                          capture_output=True, check=False, timeout=120)


def test_not_applicable_fusion_is_recorded_with_its_reason(tmp_path: Path) -> None:
    reason = load_matrix("vllm-cpu").suites["fusion"].not_applicable
    assert reason and reason.startswith("vLLM's CPU compile path applies no fusion passes")
    run = _harness(tmp_path, "run", "--matrix", "vllm-cpu", "--suite", "fusion", "--python",
                   "current", "--reports", str(tmp_path / "r"))
    assert run.returncode == 0, run.stderr
    assert f"harness: suite fusion: not applicable: {reason}" in run.stdout
    assert [ln.split()[:2] for ln in run.stdout.splitlines() if ln.startswith("fusion ")] == [
        ["fusion", "not-applicable"]]
    (folder,) = (tmp_path / "r" / "vllm-cpu").iterdir()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "passed" and manifest["suites_planned"] == []
    (suite,) = manifest["suites"]
    assert (suite["suite"], suite["status"], suite["reason"]) == ("fusion", "not-applicable",
                                                                   reason)
    db = str(tmp_path / "history.sqlite")
    assert _harness(tmp_path, "history", "ingest", str(tmp_path / "r"), "--db", db).returncode == 0
    out = tmp_path / "nightly"
    report = _harness(tmp_path, "report", "nightly", "--db", db, "--out", str(out))
    assert report.returncode == 0, report.stderr
    cells = [c for c in json.loads((out / "report.json").read_text())["suite_grid"]
             if c["lane"] == "vllm-cpu" and c["suite"] == "fusion"]
    assert [(c["state"], c["reason"]) for c in cells] == [("not-applicable", reason)]
