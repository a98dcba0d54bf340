"""The one place a suite process's environment is built (harness run, docker, kernels)."""

from __future__ import annotations

from pathlib import Path

from harness.matrix import load_matrix
from harness.platform.cache import cache_env
from harness.runners.suite_env import suite_env


def test_layers_in_order_and_the_caches_and_overrides_win(tmp_path: Path) -> None:
    cpu = load_matrix("cpu")
    caches = cache_env(cpu)
    key = next(iter(caches))
    env = suite_env(cpu, tmp_path, import_root=tmp_path / "src", inherited_pythonpath="/elsewhere",
                    defaults={"OMP_NUM_THREADS": "3", key: "from-defaults"},
                    overrides={"OMP_NUM_THREADS": "5"})
    assert env["HARNESS_ROOT"] == str(tmp_path)
    assert env["PYTHONPATH"].split(":") == [str(tmp_path / "src"), "/elsewhere"]
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["TRITON_INTERPRET"] == "1"  # a CPU matrix runs Triton interpreted
    assert env[key] == caches[key]
    assert env["OMP_NUM_THREADS"] == "5"


def test_a_gpu_matrix_interprets_triton_only_when_emulated(tmp_path: Path) -> None:
    cuda = load_matrix("cuda")
    assert "TRITON_INTERPRET" not in suite_env(cuda, tmp_path, import_root=tmp_path)
    assert suite_env(cuda, tmp_path, import_root=tmp_path, emulate=True)["TRITON_INTERPRET"] == "1"
