"""A lane's CPU as data: ``cpu: {emulated: x86-64-v2}`` runs every process of its suites
on an emulated CPU without AVX2 (qemu-user), on any x86-64 agent with AVX2 or more: the
pytest controller, its xdist workers, a subprocess, multiprocessing's children and the gloo
ranks each see it (tests/data/suites/emulated_cpu, which fails in every test when the
suites run on the agent's own CPU), the run records it as the host's CPU and device
fingerprint, and ``harness repro`` of the run runs on it again. Bad input is one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.results.manifest import RunRecord

pytestmark = [pytest.mark.timeout(1800),
              pytest.mark.skipif(shutil.which("qemu-x86_64-static") is None,
                                 reason="qemu-user-static is not installed (ci/setup-host.sh)")]
ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "data" / "suites" / "emulated_cpu" / "check_every_process.py"
TUNED = ROOT / "tests" / "data" / "suites" / "host_tuned" / "check_host_tuned.py"
SHIPPED = ("platform", "kernel_parity", "fusion", "e2e")
# An AMD Zen 5 agent's OpenBLAS setting (for older OpenBLAS builds), with its companion
ZEN5_AGENT = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576"}


def harness(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1700, check=False)


def lane(folder: Path, emulated: str) -> Path:
    matrix = folder / "every.yaml"
    matrix.write_text("\n".join([
        "extends: cpu.yaml", "name: every", "cpu:", f"  emulated: {emulated}", "suites:",
        *(f"  {name}: {{enabled: false}}" for name in SHIPPED),
        f"  every: {{path: {SUITE}, workers: 2, timeout_s: 1500}}"]) + "\n")
    return matrix


def test_every_process_of_the_lane_runs_on_its_emulated_cpu(tmp_path: Path) -> None:
    """On an agent that tunes OpenBLAS for its own CPU (an AMD Zen 5's OPENBLAS_CORETYPE=
    Haswell), as on any other: the setting is not the emulated CPU's."""
    reports = tmp_path / "reports"
    done = harness("run", "--matrix", str(lane(tmp_path, "x86-64-v2")), "--python", "current",
                   "--reports", str(reports), env={**os.environ, **ZEN5_AGENT})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "harness: cpu an emulated Nehalem-v2 (x86-64-v2) (qemu-user)" in done.stdout
    (run_dir,) = (reports / "every").iterdir()
    record = RunRecord.read(run_dir)
    assert record.host is not None and record.device_fingerprint is not None
    assert record.host.cpu_flags == [] and record.host.cpu_emulated.startswith("Nehalem-v2")
    assert record.host.agent_cpu and "avx2" not in record.device_fingerprint.data["flags"]
    assert record.counts().passed == 6

    # harness repro of the run: the recorded matrix brings its CPU along
    again = harness("repro", str(run_dir), "--test",
                    "tests/data/suites/emulated_cpu/check_every_process.py::test_the_gloo_ranks",
                    "--reports", str(tmp_path / "again"))
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-2000:]
    (rerun,) = (tmp_path / "again" / "every").iterdir()
    assert RunRecord.read(rerun).host.cpu_emulated.startswith("Nehalem-v2")  # type: ignore[union-attr]


@pytest.mark.parametrize(("emulated", "agent", "lane_sets"), [
    ("x86-64-v2", "Haswell", None),  # the Zen 5 agent's: AVX2 code on a CPU without it
    ("x86-64-v2", "SkylakeX", None),  # a core type above both levels: AVX-512 code
    ("x86-64-v3", "SkylakeX", "Haswell"),  # the lane's own setting wins
])
def test_an_emulated_cpu_inherits_none_of_the_agents_host_tuned_settings(
        emulated: str, agent: str, lane_sets: str | None, tmp_path: Path) -> None:
    """Each agent setting kills numpy's import or its GEMM on the emulated CPU (SIGILL) when
    inherited; here the suite's process multiplies, and sees only the lane's settings."""
    matrix = tmp_path / "tuned.yaml"
    matrix.write_text("\n".join([
        "extends: cpu.yaml", "name: tuned", "cpu:", f"  emulated: {emulated}",
        *(["runtime:", "  env:", f"    OPENBLAS_CORETYPE: {lane_sets}"] if lane_sets else []),
        "suites:", *(f"  {name}: {{enabled: false}}" for name in SHIPPED),
        f"  tuned: {{path: {TUNED}, workers: 1, timeout_s: 600}}"]) + "\n")
    reports = tmp_path / "reports"
    done = harness("run", "--matrix", str(matrix), "--python", "current", "--reports",
                   str(reports), env={**os.environ, **ZEN5_AGENT, "OPENBLAS_CORETYPE": agent})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    left = {**ZEN5_AGENT, "OPENBLAS_CORETYPE": agent}
    if lane_sets:
        del left["OPENBLAS_CORETYPE"]
    said = ", ".join(f"{k}={v}" for k, v in left.items())
    assert f"harness: cpu: this agent's {said} left out (host-tuned" in done.stdout, done.stdout
    (run_dir,) = (reports / "tuned").iterdir()
    record = RunRecord.read(run_dir)
    assert record.host is not None and record.host.agent_env_left_out == left
    assert record.counts().passed == 2


def test_the_agents_own_cpu_keeps_its_settings(tmp_path: Path) -> None:
    """The safe side: a lane on the agent's own CPU inherits them, and says nothing."""
    matrix = tmp_path / "own.yaml"
    matrix.write_text("\n".join([
        "extends: cpu.yaml", "name: own", "suites:",
        *(f"  {name}: {{enabled: false}}" for name in SHIPPED),
        f"  own: {{path: {TUNED.with_name('check_agent_cpu.py')}, workers: 1}}"]) + "\n")
    reports = tmp_path / "reports"
    done = harness("run", "--matrix", str(matrix), "--python", "current", "--reports",
                   str(reports), env={**os.environ, **ZEN5_AGENT})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "left out" not in done.stdout
    (run_dir,) = (reports / "own").iterdir()
    assert RunRecord.read(run_dir).host.agent_env_left_out == {}  # type: ignore[union-attr]


@pytest.mark.parametrize(("emulated", "says"), [
    ("x86-64-v4", "x86-64-v4 needs AVX-512, which qemu's TCG does not emulate"),
    ("x86-64-v9", "unknown x86-64 level 'x86-64-v9'"),
    ("Skylake-Server-v1", "Skylake-Server-v1: qemu's TCG cannot emulate avx512f"),
    ("Pentium-Pro-X", "'Pentium-Pro-X' is no CPU model of qemu-x86_64-static"),
])
def test_a_cpu_qemu_cannot_be_is_one_line_and_nothing_runs(emulated: str, says: str,
                                                          tmp_path: Path) -> None:
    done = harness("run", "--matrix", str(lane(tmp_path, emulated)), "--python", "current",
                   "--reports", str(tmp_path / "reports"))
    assert done.returncode in (2, 3), done.stdout[-2000:] + done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not list((tmp_path / "reports").glob("every/*/junit/*.xml"))


def test_without_qemu_the_run_is_exit_3_with_the_install_command(tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("git", "lscpu", "g++"):
        found = shutil.which(tool)
        if found:
            (bare / tool).symlink_to(found)
    env = {**os.environ, "PATH": str(bare)}
    done = harness("run", "--matrix", str(lane(tmp_path, "x86-64-v3")), "--python", "current",
                   "--reports", str(tmp_path / "reports"), env=env)
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr
    assert "qemu-user is not installed" in done.stderr
    assert "apt-get install -y qemu-user-static" in done.stderr
    doctor = harness("doctor", "--matrix", str(lane(tmp_path, "x86-64-v3")), env=env)
    assert doctor.returncode == 3 and "qemu-user is not installed" in doctor.stdout, (
        doctor.stdout + doctor.stderr)


def test_the_v3_lane_shows_the_avx2_hosts_vllm_findings(tmp_path: Path,
                                                        shared_cache: Path) -> None:
    """vllm-cpu-v3 on any agent: vLLM picks _C_AVX2 itself, the run's host is an AVX2 CPU,
    and the AVX2 host's findings (bf16 onednn_mm refused, int8 W8A8 saturating without
    VNNI) are xfails through the known failures' own host conditions; the lane sets no
    library and no oneDNN cap."""
    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    from harness.matrix import load_matrix

    env = load_matrix("vllm-cpu-v3").runtime.env
    assert "ONEDNN_MAX_CPU_ISA" not in env and "HARNESS_VLLM_KERNEL_LIBRARY" not in env
    reports = tmp_path / "reports"
    done = harness("run", "--matrix", "vllm-cpu-v3", "--suite", "kernel_parity", "-k",
                   "vllm and (linear or int8_scaled_gemm-per-token-bias)", "--reports",
                   str(reports))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    (run_dir,) = (reports / "vllm-cpu-v3").iterdir()
    record = RunRecord.read(run_dir)
    assert record.host is not None and record.device_fingerprint is not None
    assert "avx2" in record.host.cpu_flags and "avx512f" not in record.host.cpu_flags
    assert record.device_fingerprint.data.get("kernel_library") == "vllm _C_AVX2"
    xfails = [line for line in done.stdout.splitlines() if "XFAIL" in line]
    assert any("linear" in x and "bfloat16-vllm-cpu" in x and "without avx512f" in x
               for x in xfails), xfails
    assert any("int8_scaled_gemm-per-token-bias" in x and "without avx512_vnni" in x
               for x in xfails), xfails


def test_a_standalone_script_of_the_v3_lane_runs_its_case_on_that_cpu(
        tmp_path: Path, shared_cache: Path) -> None:
    """A finding made on the emulated lane says so in its script (ENV's QEMU_CPU) and runs
    its case there itself: the AVX2 host's bf16 onednn_mm refusal, from any x86-64 agent;
    QEMU_CPU= runs it on this machine's CPU instead."""
    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    from harness.matrix import load_matrix
    from harness.platform.host import cpu_flags
    from harness.run.venvs import Environment

    script = tmp_path / "repro.py"
    case = ("suites/kernel_parity/test_parity.py::"
            "test_parity[linear-bias-strided-2d-k-small-bfloat16-vllm-cpu]")
    agent = {**os.environ, "OPENBLAS_CORETYPE": "SkylakeX"}  # AVX-512 code: not the lane's
    made = harness("repro", "--matrix", "vllm-cpu-v3", "--test", case, "--standalone",
                   str(script), env=agent)
    assert made.returncode == 0, made.stdout + made.stderr
    assert '"QEMU_CPU": "Haswell-v4' in script.read_text()
    python = str(Environment.of(load_matrix("vllm-cpu"), emulate=False).python())
    env = {k: v for k, v in agent.items() if k not in ("PYTHONPATH", "HARNESS_ROOT")}
    seen = subprocess.run([python, str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    assert seen.returncode == 1, seen.stdout + seen.stderr
    assert "kernel library: _C_AVX2" in seen.stdout and "capability: AVX2" in seen.stdout
    assert "could not create a primitive descriptor" in seen.stdout
    assert "env OPENBLAS_CORETYPE=SkylakeX of this machine left out" in seen.stdout
    del env["OPENBLAS_CORETYPE"]
    here = subprocess.run([python, str(script)], cwd=tmp_path, env={**env, "QEMU_CPU": ""},
                          capture_output=True, text=True, timeout=900, check=False)
    assert here.returncode == (0 if "avx512f" in cpu_flags() else 1), here.stdout + here.stderr
    # on a CPU below every library (x86-64-v2): the library's load is tried in a fork of
    # the emulated process (a child of sys.executable would run on this machine's CPU,
    # load, and the script would then die of SIGILL itself): it could not run, exit 3
    nehalem = subprocess.run([python, str(script)], cwd=tmp_path, capture_output=True,
                             env={**env, "QEMU_CPU": "Nehalem-v2,-pcid,-x2apic,-tsc-deadline"},
                             text=True, timeout=900, check=False)
    assert nehalem.returncode == 3, nehalem.stdout + nehalem.stderr
    assert ("cannot run: loading _C_AVX2.abi3.so on a CPU without AVX2 (torch: DEFAULT): "
            "its process killed by SIGILL") in nehalem.stdout, nehalem.stdout


def test_no_script_is_made_from_the_v2_lane_where_vllm_cannot_load(tmp_path: Path,
                                                                   shared_cache: Path) -> None:
    """The x86-64-v2 lane's vLLM cases: its library's load kills its process (the lane's
    finding, its known failures); a kernel script of one is refused with that line, exit
    3, and nothing written."""
    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    script = tmp_path / "repro.py"
    case = ("suites/kernel_parity/test_parity.py::"
            "test_parity[linear-bias-strided-2d-k-small-bfloat16-vllm-cpu]")
    made = harness("repro", "--matrix", "vllm-cpu-v2", "--test", case, "--standalone",
                   str(script), env={**os.environ, **ZEN5_AGENT})
    assert made.returncode == 3, made.stdout + made.stderr
    assert ("--standalone: the script cannot run here: loading _C_AVX2.abi3.so on a CPU "
            "without AVX2 (torch: DEFAULT): its process killed by SIGILL") in made.stderr
    assert not script.exists()


def test_the_engine_script_of_the_v3_lane_judges_on_that_cpu(tmp_path: Path,
                                                             shared_cache: Path) -> None:
    """vLLM's engine against transformers, bf16, made from the emulated AVX2 lane (where
    the known failure holds): on the lane's CPU the script sees the tokens differ, exit 1
    (inductor compiling for the lane's level, as in the lane: for this machine's CPU it
    died of SIGILL, a finding of its own making); QEMU_CPU= on an AVX-512 machine, 0."""
    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    from harness.matrix import load_matrix
    from harness.platform.host import cpu_flags
    from harness.run.venvs import Environment

    script = tmp_path / "repro.py"
    case = "suites/vllm_engine/test_vllm_engine.py::test_greedy_tokens_match_transformers[bfloat16]"
    made = harness("repro", "--matrix", "vllm-cpu-v3", "--test", case, "--standalone",
                   str(script), env={**os.environ, **ZEN5_AGENT})
    assert made.returncode == 0, made.stdout + made.stderr
    assert "seen here: tokens differ" in made.stdout, made.stdout
    text = script.read_text()
    assert '"QEMU_CPU": "Haswell-v4' in text and '"TORCHINDUCTOR_CPP_MARCH": "x86-64-v3"' in text
    python = str(Environment.of(load_matrix("vllm-cpu"), emulate=False).python())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARNESS_ROOT")}
    seen = subprocess.run([python, str(script)], cwd=tmp_path, env={**env, **ZEN5_AGENT},
                          capture_output=True, text=True, timeout=1200, check=False)
    assert seen.returncode == 1, seen.stdout + seen.stderr
    assert "kernel library vLLM loaded: _C_AVX2" in seen.stdout
    assert "capability: AVX2" in seen.stdout and "the finding is there" in seen.stdout
    assert "env OPENBLAS_CORETYPE=Haswell of this machine left out" in seen.stdout
    here = subprocess.run([python, str(script)], cwd=tmp_path, env={**env, "QEMU_CPU": ""},
                          capture_output=True, text=True, timeout=900, check=False)
    assert here.returncode == (0 if "avx512f" in cpu_flags() else 1), here.stdout + here.stderr
