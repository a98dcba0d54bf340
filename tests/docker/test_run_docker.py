"""``harness run --docker`` end to end: the cpu image against the local run, and s390x.

The cpu image holds torch (about 2 GB on vfs); the s390x one runs under qemu-user.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import ROOT

# The cpu matrix's own cache (downloads, tokenizer files) as CI keeps it between runs;
# each run may build its image first: as long as harness_run allows.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("shared_cache"),
              pytest.mark.timeout(3600)]


def harness_run(*args: str, reports: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "run", *args, "--reports", str(reports)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )


def outcomes(run_dir: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(run_dir / "merged.xml").getroot().iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        out[f"{case.get('classname')}::{case.get('name')}"] = kinds[0] if kinds else "passed"
    return out


def progress(stdout: str) -> list[str]:
    """The progress lines (run/progress.py) without their times and estimates:
    "harness: suite 1 of 1: platform", "harness: suite 1 of 1 platform: passed"."""
    return [line.split(";")[0] for line in stdout.splitlines()
            if line.startswith("harness: suite ") and " of " in line]


def run_dir_of(reports: Path, matrix: str) -> Path:
    (run_dir,) = (reports / matrix).iterdir()
    return run_dir


def need_image(client: Any, tag: str, how: str) -> None:
    if not any(tag in (i.tags or []) for i in client.images.list()):
        reason = f"{tag} missing; build it with {how}"
        if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


def test_cpu_in_docker_matches_the_local_run(client: Any, tmp_path: Path) -> None:
    reports = ROOT / "reports" / "dockertest" / tmp_path.name
    try:
        docker = harness_run(
            "--matrix", "cpu", "--docker", "--suite", "platform", reports=reports / "docker"
        )
        assert docker.returncode == 0, docker.stdout[-4000:] + docker.stderr[-2000:]
        local = harness_run(
            "--matrix",
            "cpu",
            "--suite",
            "platform",
            "--python",
            "current",
            reports=reports / "local",
        )
        assert local.returncode == 0, local.stdout[-3000:]
        in_docker = run_dir_of(reports / "docker", "cpu")
        manifest = json.loads((in_docker / "manifest.json").read_text())
        assert manifest["runner"] == "docker" and manifest["image"]
        assert manifest["device_fingerprint"]["kind"] == "lscpu"
        assert outcomes(in_docker) == outcomes(run_dir_of(reports / "local", "cpu"))
        # One runner interface: the docker run prints the local run's progress lines.
        assert progress(docker.stdout) == progress(local.stdout) == [
            "harness: suite 1 of 1: platform", "harness: suite 1 of 1 platform: passed"]
        left = subprocess.run(
            ["docker", "ps", "-a", "-q", "--filter", "label=org.harness.matrix=cpu"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert left == []
    finally:
        subprocess.run(["rm", "-rf", str(reports)], check=False)


def test_s390x_platform_suite_under_qemu(client: Any, tmp_path: Path) -> None:
    need_image(client, "harness-base-s390x:forky", "ci/make-s390x-image.sh")
    reports = ROOT / "reports" / "dockertest" / tmp_path.name
    try:
        done = harness_run("--matrix", "s390x", "--docker", "--suite", "platform", reports=reports)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        # The progress lines of a local run (suite i of N, counts so far), under qemu too.
        started, ended = progress(done.stdout)
        assert started == "harness: suite 1 of 1: platform"
        assert ended.startswith("harness: suite 1 of 1 platform: ") and "so far " in done.stdout
        run_dir = run_dir_of(reports, "s390x")
        manifest = json.loads((run_dir / "manifest.json").read_text())
        fingerprint = manifest["device_fingerprint"]
        assert fingerprint["arch"] == ["s390x"] and fingerprint["byteorder"] == "big"
        got = outcomes(run_dir)
        passed = [t for t, o in got.items() if o == "passed"]
        assert any("test_byteorder_matches" in t for t in passed)
        assert any("test_bf16_conversion_is_byte_order_safe" in t for t in passed)
    finally:
        subprocess.run(["rm", "-rf", str(reports)], check=False)
