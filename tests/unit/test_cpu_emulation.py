"""A lane's emulated CPU as data: the matrix key's checks, the wrapper, and a non-x86 agent
(the real runs: tests/integration/test_emulated_cpu.py)."""

from __future__ import annotations

import json
import os
import platform
import stat
import subprocess
from pathlib import Path

import pytest

from harness.errors import ConfigError, UsageError
from harness.matrix import load_matrix
from harness.matrix.model import Cpu
from harness.platform import cpu_emulation


def write(tmp_path: Path, emulated: str, extends: str = "cpu.yaml") -> Path:
    path = tmp_path / "lane.yaml"
    path.write_text(f"extends: {extends}\nname: lane\ncpu:\n  emulated: {emulated}\n")
    return path


@pytest.mark.parametrize(("emulated", "says"), [
    ("x86-64-v4", "cpu.emulated: x86-64-v4 needs AVX-512"),
    ("x86-64-v1", "cpu.emulated: unknown x86-64 level 'x86-64-v1'"),
])
def test_a_level_qemu_cannot_be_names_file_line_and_key(emulated: str, says: str,
                                                        tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        load_matrix(str(write(tmp_path, emulated)))
    assert f"{tmp_path / 'lane.yaml'}:4:" in str(caught.value)


def test_an_emulated_cpu_is_for_a_cpu_lane(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="an emulated CPU is for a CPU lane"):
        load_matrix(str(write(tmp_path, "x86-64-v3", "cuda.yaml")))


def test_a_level_is_its_model() -> None:
    assert Cpu(emulated="x86-64-v3").model == "Haswell-v4"
    assert Cpu(emulated="EPYC-v3").model == "EPYC-v3"
    assert load_matrix("vllm-cpu-v3").cpu.describe() == (
        "an emulated Haswell-v4 (x86-64-v3) (qemu-user)")
    assert load_matrix("vllm-cpu").cpu.model is None


def test_a_non_x86_agent_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    with pytest.raises(UsageError, match="an emulated x86-64 CPU runs on an x86-64 agent, "
                                         "not aarch64"):
        cpu_emulation.qemu()


QEMU = cpu_emulation.shutil.which("qemu-x86_64-static") or cpu_emulation.shutil.which(
    "qemu-x86_64")
needs_qemu = pytest.mark.skipif(QEMU is None or platform.machine() != "x86_64",
                                reason="qemu-user on an x86-64 agent (ci/setup-host.sh)")


@needs_qemu
def test_a_levels_option_is_its_model_less_what_tcg_drops_and_qemu_runs_it_quietly() -> None:
    import subprocess
    import sys

    assert QEMU is not None
    option = cpu_emulation.cpu_option(Cpu(emulated="x86-64-v3"), QEMU)
    model, *off = option.split(",")
    assert model == "Haswell-v4" and off and all(f.startswith("-") for f in off)
    assert not any(f.startswith(("-avx", "-sse", "-fma", "-bmi")) for f in off)
    assert [f"-{f}" for f in cpu_emulation.dropped(QEMU, model)] == off
    quiet = subprocess.run([QEMU, "-cpu", option, sys.executable, "-c", ""],
                           capture_output=True, text=True, timeout=120, check=False)
    assert quiet.returncode == 0 and "TCG doesn't support" not in quiet.stderr, quiet.stderr


@needs_qemu
def test_a_model_that_needs_avx512_and_one_qemu_does_not_know_are_one_line_each() -> None:
    assert QEMU is not None
    import re

    with pytest.raises(ConfigError, match=r"^cpu.emulated: Skylake-Server-v1: qemu's TCG "
                                          r"cannot emulate avx512f, .*\(AVX-512 and AMX "
                                          r"CPUs stay with real agents\)$") as caught:
        cpu_emulation.cpu_option(Cpu(emulated="Skylake-Server-v1"), QEMU)
    named = re.search(r"cannot emulate (.*) \(AVX", str(caught.value))
    assert named is not None and named[1].split(", ")[4:] == ["..."]  # four, then "..."
    with pytest.raises(ConfigError, match=r"^cpu.emulated: 'NoSuchCpu-v9' is no CPU model of "
                                          r"qemu-x86_64\S* \(some: [^;]*-v\d, \.\.\.; or a "
                                          r"level: x86-64-v2, x86-64-v3\)$") as caught:
        cpu_emulation.cpu_option(Cpu(emulated="NoSuchCpu-v9"), QEMU)
    some = re.search(r"\(some: (.*), \.\.\.;", str(caught.value))
    assert some is not None and len(some[1].split(", ")) == 12


@needs_qemu
@pytest.mark.parametrize(("emulated", "march"), [
    ("x86-64-v2", "x86-64-v2"), ("x86-64-v3", "x86-64-v3"),  # a level is its own
    ("Haswell-v4", "x86-64-v3"), ("Nehalem-v2", "x86-64-v2"),  # a model: by its CPUID
    ("core2duo", "x86-64"),  # SSSE3 but no SSE4.2: below every level
])
def test_the_compilers_march_is_the_lanes_level(emulated: str, march: str) -> None:
    assert cpu_emulation.march(Cpu(emulated=emulated)) == march


def test_only_an_emulated_lane_leaves_out_the_agents_host_tuned_settings() -> None:
    agent = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576", "HOME": "/h"}
    own = load_matrix("vllm-cpu")
    assert cpu_emulation.left_out(own, (), agent) == {}
    assert cpu_emulation.lane_environ(own, (), agent) == agent
    lane = load_matrix("vllm-cpu-v2")
    assert cpu_emulation.left_out(lane, (), agent) == {"OPENBLAS_CORETYPE": "Haswell",
                                                       "OPENBLAS_L2_SIZE": "1048576"}
    # what the run sets itself (--env) is the lane's, not the agent's
    assert cpu_emulation.left_out(lane, ("OPENBLAS_L2_SIZE",), agent) == {
        "OPENBLAS_CORETYPE": "Haswell"}
    assert cpu_emulation.lane_environ(lane, ("OPENBLAS_L2_SIZE",), agent) == {
        "OPENBLAS_L2_SIZE": "1048576", "HOME": "/h"}


def test_the_left_out_line_names_each_setting_and_says_nothing_for_none() -> None:
    assert cpu_emulation.describe_left_out({}) == ""
    assert cpu_emulation.describe_left_out({"A": "1", "B": "2"}) == (
        "cpu: this agent's A=1, B=2 left out (host-tuned, not the emulated CPU's; the "
        "matrix's runtime.env gives the lane its own)")


def test_the_wrapper_lies_beside_the_interpreter_named_for_the_model() -> None:
    assert cpu_emulation.wrapper_path("/venv/bin/python", Cpu(emulated="x86-64-v2")) == Path(
        "/venv/bin/python-cpu-Nehalem-v2")


def test_four_features_tcg_cannot_give_are_named_all_and_five_with_dots(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The line's shortening at its boundary (the real refusal above: a model of more)."""
    four = ("avx512f", "avx512dq", "avx512cd", "avx512bw")
    monkeypatch.setattr(cpu_emulation, "models", lambda emulator: frozenset({"Big-v1"}))
    monkeypatch.setattr(cpu_emulation, "dropped", lambda emulator, model: four)
    with pytest.raises(ConfigError, match=r"emulate avx512f, avx512dq, avx512cd, avx512bw "
                                          r"\(AVX-512"):
        cpu_emulation.cpu_option(Cpu(emulated="Big-v1"), "qemu")
    monkeypatch.setattr(cpu_emulation, "dropped", lambda emulator, model: (*four, "amx-tile"))
    with pytest.raises(ConfigError, match=r"emulate avx512f, avx512dq, avx512cd, avx512bw, "
                                          r"\.\.\. \(AVX-512"):
        cpu_emulation.cpu_option(Cpu(emulated="Big-v1"), "qemu")


def test_no_qemu_installed_is_one_line_with_the_command_that_installs_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setenv("PATH", "")
    with pytest.raises(cpu_emulation.InfraError, match=r"^qemu-user is not installed .*: "
                                                       r"apt-get install -y qemu-user-static; "
                                                       r"nothing was run$"):
        cpu_emulation.qemu()
    monkeypatch.setattr(platform, "machine", lambda: "AMD64")  # Windows' name for it
    with pytest.raises(cpu_emulation.InfraError):
        cpu_emulation.qemu()


@needs_qemu
def test_the_wrapper_runs_the_interpreter_on_the_lanes_cpu(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    cpu = Cpu(emulated="x86-64-v2")
    path = Path(cpu_emulation.wrap(str(python), cpu, write=False))
    assert path == bin_dir / "python-cpu-Nehalem-v2" and not path.exists()
    assert cpu_emulation.wrap(str(python), cpu) == str(path)
    text = path.read_text()
    option = cpu_emulation.cpu_option(cpu, cpu_emulation.qemu())
    assert f'exec {cpu_emulation.qemu()} -cpu {option} -0 "$0" "{python}" "$@"\n' in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert not path.with_name(path.name + ".tmp").exists()
    # a name on PATH: the wrapper lies beside the interpreter it names
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert cpu_emulation.wrap("python", cpu, write=False) == str(path)
    monkeypatch.undo()
    probe = ("import json, os, sys; print(json.dumps([sys.executable, "
             "os.environ['HARNESS_EMULATED_CPU'], os.environ['TORCHINDUCTOR_CPP_MARCH']]))")
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CPP_MARCH"}
    done = subprocess.run([str(path), "-c", probe], capture_output=True, text=True,
                          timeout=120, env=env, check=True)
    assert json.loads(done.stdout) == [str(path), "Nehalem-v2", "x86-64-v2"]
    env["TORCHINDUCTOR_CPP_MARCH"] = "nehalem"  # the caller's own -march stays
    done = subprocess.run([str(path), "-c", probe], capture_output=True, text=True,
                          timeout=120, env=env, check=True)
    assert json.loads(done.stdout)[2] == "nehalem"
    # written once: the same text is left alone, another one replaced
    os.utime(path, (1, 1))
    cpu_emulation.wrap(str(python), cpu)
    assert path.stat().st_mtime == 1
    path.write_text("old")
    cpu_emulation.wrap(str(python), cpu)
    assert path.read_text() == text


@needs_qemu
def test_the_facts_are_cpuid_inside_the_emulation(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    found = cpu_emulation.facts(Cpu(emulated="x86-64-v2"))
    assert found["option"] == cpu_emulation.cpu_option(Cpu(emulated="x86-64-v2"),
                                                       cpu_emulation.qemu())
    flags = set(found["flags"])  # type: ignore[call-overload]
    assert {"sse4_2", "popcnt"} <= flags and "avx" not in flags
    emulator = cpu_emulation.qemu()
    listed = subprocess.run([emulator, "-cpu", "help"], capture_output=True, text=True,
                            check=False).stdout.splitlines()  # qemu 7.2 exits 1 after it
    # every model qemu lists (some with no description), and none of its flags' words
    assert cpu_emulation.models(emulator) == {line.split()[1] for line in listed
                                              if line.startswith("x86 ")}
    assert "Nehalem-v2" in cpu_emulation.models(emulator)
    with pytest.raises(ConfigError, match="'CPUID' is no CPU model of qemu-x86_64"):
        cpu_emulation.cpu_option(Cpu(emulated="CPUID"), emulator)
    broken = tmp_path / "cpuid.py"
    broken.write_text("import sys\nsys.stderr.write('first\\nno cpuid here\\n')\nsys.exit(1)\n")
    monkeypatch.setattr(cpu_emulation, "CPUID_SCRIPT", broken)
    cpu_emulation._facts.cache_clear()
    try:
        with pytest.raises(cpu_emulation.InfraError, match=r"^the emulated Nehalem-v2: CPUID "
                                                           r"could not be read: no cpuid here$"):
            cpu_emulation.facts(Cpu(emulated="x86-64-v2"))
        broken.write_text("import sys\nsys.exit(1)\n")
        with pytest.raises(cpu_emulation.InfraError, match=r"could not be read: no output$"):
            cpu_emulation.facts(Cpu(emulated="Nehalem-v1"))
    finally:
        cpu_emulation._facts.cache_clear()
