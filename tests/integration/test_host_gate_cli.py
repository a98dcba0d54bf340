"""``harness doctor`` and ``harness run`` on the zen lane, in a subprocess, on three hosts:
an ``lscpu`` first on PATH prints a host's capture (tests/data/probe/lscpu-*.json; the
gate's logic itself is tests/unit/test_host_gate.py)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.matrix import list_matrices

DATA = Path(__file__).resolve().parents[1] / "data" / "probe"
HOSTS = {"zen4": "lscpu-zen4.json", "zen3": "lscpu-zen3.json", "intel": "lscpu-intel-spr.json"}
# What the zen matrix's probe says of each host it refuses.
ZEN_REFUSES = {
    "zen3": "probe: expected CPU flags avx512_bf16, avx512_vnni, not reported",
    "intel": "probe: expected CPU vendor AuthenticAMD, found GenuineIntel",
}


def _fake_lscpu(tmp_path: Path, host: str) -> str:
    """A folder holding an ``lscpu`` that prints the host's capture, first on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    script = folder / "lscpu"
    script.write_text(f"#!/bin/sh\ncat '{DATA / HOSTS[host]}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def _harness(tmp_path: Path, host: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": _fake_lscpu(tmp_path, host), "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "harness", *args], env=env, text=True,
                          capture_output=True, check=False, timeout=120)


@pytest.mark.parametrize("host", ["zen3", "intel"])
def test_doctor_and_run_refuse_zen_with_the_probes_line(tmp_path: Path, host: str) -> None:
    doctor = _harness(tmp_path, host, "doctor", "--matrix", "zen")
    assert doctor.returncode == 3, doctor.stdout
    (line,) = [ln for ln in doctor.stdout.splitlines() if ln.startswith("MISSING")]
    assert f"CPU for matrix zen: {ZEN_REFUSES[host]}" in line
    run = _harness(tmp_path, host, "run", "--matrix", "zen", "--suite", "platform",
                   "--reports", str(tmp_path / "r"))
    assert run.returncode == 3 and run.stderr.strip().splitlines() == [
        f"harness: error: {ZEN_REFUSES[host]}; to run the zen profile on this CPU: "
        "harness run --matrix zen --emulate"], run.stderr
    assert not (tmp_path / "r").exists()
    assert not (tmp_path / ".cache" / "harness" / "venvs").exists()


def test_skip_unavailable_records_the_lane_as_skipped(tmp_path: Path) -> None:
    run = _harness(tmp_path, "zen3", "run", "--matrix", "zen", "--suite", "platform",
                   "--skip-unavailable", "--reports", str(tmp_path / "r"))
    assert run.returncode == 0, run.stderr
    (folder,) = (tmp_path / "r" / "zen").iterdir()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "skipped" and manifest["exit_code"] == 0
    assert manifest["infra_error"]["message"].startswith(ZEN_REFUSES["zen3"])
    assert manifest["suites"] == []
    assert not (tmp_path / ".cache" / "harness" / "venvs").exists()  # nothing was built
    # The history and the nightly report list the lane as skipped with the probe's line.
    db = str(tmp_path / "history.sqlite")
    ingest = _harness(tmp_path, "zen3", "history", "ingest", str(tmp_path / "r"), "--db", db)
    assert ingest.returncode == 0, ingest.stderr
    out = tmp_path / "nightly"
    report = _harness(tmp_path, "zen3", "report", "nightly", "--db", db, "--out", str(out))
    assert report.returncode == 0, report.stderr
    data = json.loads((out / "report.json").read_text())
    lanes = {lane["name"]: lane for lane in data["lanes"]}
    assert lanes["zen"]["skipped"] == manifest["infra_error"]["message"]
    assert lanes["zen"]["latest_status"] == "skipped" and lanes["zen"]["infra_label"] is None
    assert data["infra"] == []  # not an infrastructure failure
    declared = len(list_matrices())
    assert f"0/{declared} platforms ran (1 skipped on a host not theirs)" in data["headline"]
    assert f"**zen** skipped: `{ZEN_REFUSES['zen3']}" in (out / "report.md").read_text()


def test_doctor_accepts_zen_on_zen4(tmp_path: Path) -> None:
    doctor = _harness(tmp_path, "zen4", "doctor", "--matrix", "zen")
    lines = [ln for ln in doctor.stdout.splitlines() if "CPU for matrix zen" in ln]
    assert len(lines) == 1 and lines[0].startswith("ok"), doctor.stdout
