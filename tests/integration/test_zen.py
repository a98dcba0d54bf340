"""The zen matrix for real: its own venv (torch 2.14.1 + zentorch), on this AMD EPYC host.

Slow the first time (the venv is about 5.6 GB, built once per pins and then reused).
Skipped where the zen matrix's own probe refuses this CPU, with the probe's line (the
check `harness run --matrix zen` makes; tests/unit/test_host_gate.py covers three hosts).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.matrix import load_matrix
from harness.platform.doctor import check_cpu_probe
from harness.roots import project_root

ROOT = project_root()
GATE = check_cpu_probe(load_matrix("zen"))
pytestmark = [
    pytest.mark.timeout(2000),  # each test waits up to 1800 s for its harness or pytest run
    pytest.mark.skipif(not GATE.ok, reason=f"the zen matrix's probe refuses this host: "
                       f"{GATE.detail}"),
]


@pytest.fixture(scope="module")
def zen_python(shared_cache: Path) -> Path:
    """The zen venv in the shared cache (about 5.6 GB: built once per pins, then reused)."""
    from harness.platform.cache import cache_root
    from harness.run.venvs import ensure_venv

    matrix = load_matrix("zen")
    return ensure_venv(matrix.python.requirements, cache_root(matrix), label=matrix.name)


def test_harness_run_zen_platform_suite_passes(zen_python: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--matrix", "zen", "--suite", "platform",
         "--reports", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "test_zentorch_imports_and_matches_torch" not in done.stdout  # not skipped


def test_zentorch_provider_findings_hold(zen_python: Path) -> None:
    """Real zentorch against the fp32 reference; its known bugs are strict xfails."""
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [str(zen_python), "-m", "pytest", "tests/kernels/test_zentorch_provider.py", "-q",
         "-p", "no:cacheprovider", "-p", "harness.pytest_entry", "-o", "addopts="],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False, env=env)
    assert done.returncode == 0, done.stdout[-4000:]
    assert " passed" in done.stdout and "xfailed" in done.stdout and "skipped" not in done.stdout


def test_plain_pytest_with_platform_zen_in_its_venv(zen_python: Path) -> None:
    """No CLI: pytest in the zen venv, the plugin from the checkout."""
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [str(zen_python), "-m", "pytest", "-p", "harness.pytest_entry", "--platform", "zen",
         "suites/platform", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False, env=env)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "harness: platform zen" in done.stdout
