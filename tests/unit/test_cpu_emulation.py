"""A lane's emulated CPU as data: the matrix key's checks, the wrapper, and a non-x86 agent
(the real runs: tests/integration/test_emulated_cpu.py)."""

from __future__ import annotations

import platform
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
