"""The e2e suite needs no network: it passes inside a network namespace with no interfaces
up (``unshare -n``), tokenising through the primed cache alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cache_matrix import harness, temp_cpu_matrix

NO_NET = ("unshare", "-n")
PROBE = (
    "import socket\n"
    "s = socket.socket(); s.settimeout(2)\n"
    "print(s.connect_ex(('192.0.2.1', 443)))\n"  # TEST-NET-1: never a real host
)


def _unshare_or_skip() -> None:
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    done = subprocess.run([*NO_NET, "true"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"unshare -n is not permitted here: {done.stderr.strip()}")


def test_e2e_passes_without_network(tmp_path: Path) -> None:
    _unshare_or_skip()
    # The namespace really has no route out (ENETUNREACH), not just a slow one.
    probe = subprocess.run(
        [*NO_NET, sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    )
    assert probe.stdout.strip() == "101", probe.stdout

    matrix = temp_cpu_matrix(tmp_path)
    primed = harness("cache", "prime", "--matrix", str(matrix))
    assert primed.returncode == 0, primed.stdout + primed.stderr
    reports = tmp_path / "reports"
    done = harness(
        "run",
        "--matrix",
        str(matrix),
        "--suite",
        "e2e",
        "--python",
        "current",
        "-k",
        "native",
        "--reports",
        str(reports),
        prefix=NO_NET,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    (run_dir,) = (reports / "cpu").iterdir()
    cases = list(ET.parse(run_dir / "junit" / "e2e.xml").iter("testcase"))
    names = sorted(c.get("name", "") for c in cases)
    assert names == ["test_generate[native-llama]", "test_generate[native-moe]"], names
    assert not any(c.find("skipped") is not None or c.find("failure") is not None for c in cases)
