"""harness doctor and the run preflight: one line per missing thing, exit 3, nothing built."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.matrix import load_matrix
from harness.platform.doctor import check_headers, device_present

Done = subprocess.CompletedProcess[str]


def _harness(*args: str, home: Path, path: str | None = None) -> Done:
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "HARNESS_ROOT")}
    env["HOME"] = str(home)  # the cache root (~/.cache/harness) lives here: nothing shared
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "harness", *args], text=True,
                          capture_output=True, env=env, check=False, timeout=120)


def _no_compiler_path(tmp_path: Path) -> str:
    empty = tmp_path / "bin"
    empty.mkdir()
    return str(empty)


def test_doctor_names_the_missing_compiler_and_exits_3(tmp_path: Path) -> None:
    done = _harness("doctor", home=tmp_path, path=_no_compiler_path(tmp_path))
    assert done.returncode == 3, done.stdout + done.stderr
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("MISSING")]
    assert len([ln for ln in lines if ln.endswith("apt-get install -y g++")]) == 1, lines
    assert any(ln.startswith("ok       Python:") for ln in done.stdout.splitlines())


def test_run_stops_before_building_an_environment(tmp_path: Path) -> None:
    done = _harness("run", "--suite", "kernel_parity", "--reports", str(tmp_path / "r"),
                    home=tmp_path, path=_no_compiler_path(tmp_path))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "apt-get install -y g++" in done.stderr
    assert not (tmp_path / ".cache" / "harness" / "venvs").exists()
    assert not (tmp_path / "r").exists()  # not even a run folder


def test_platform_suite_needs_no_compiler(tmp_path: Path) -> None:
    # Only suites that compile need g++: the plan decides, here as a dry run of checks.
    from harness.platform.doctor import run_checks

    checks = run_checks(load_matrix("cpu"), suites=["platform"])
    assert [c.what.split(" ")[0] for c in checks] == ["Python", "venv"]


@pytest.mark.skipif(device_present("amd-smi")[0], reason="this host has an AMD GPU")
def test_gpu_matrix_without_its_gpu_is_one_line(tmp_path: Path) -> None:
    for argv, cmd in [
        (["run", "--matrix", "rocm"], "harness run --matrix rocm --emulate"),
        (["run", "--matrix", "rocm", "--local"], "harness run --matrix rocm --emulate"),
        (["kernels", "--matrix", "rocm"], "harness kernels --matrix rocm --emulate"),
    ]:
        reports = ["--reports", str(tmp_path / "r")] if argv[0] == "run" else []
        done = _harness(*argv, *reports, home=tmp_path)
        errors = done.stderr.strip().splitlines()
        assert done.returncode == 3 and len(errors) == 1, done.stderr
        assert errors[0].startswith("harness: error: no AMD GPU here")
        assert errors[0].endswith(cmd)
        assert not (tmp_path / ".cache" / "harness" / "venvs").exists()


def test_doctor_for_a_gpu_matrix_suggests_emulate(tmp_path: Path) -> None:
    if device_present("nvidia-smi")[0]:
        pytest.skip("this host has an NVIDIA GPU")
    done = _harness("doctor", "--matrix", "cuda", home=tmp_path)
    assert done.returncode == 3
    assert "no NVIDIA GPU here" in done.stdout and "use --emulate" in done.stdout
    emulated = _harness("doctor", "--matrix", "cuda", "--emulate", home=tmp_path)
    assert "NVIDIA" not in emulated.stdout


def test_headers_check_names_python3_dev(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Stand-in for a host without python3-dev (the clean-room CI step checks the real one).
    import sysconfig

    real = check_headers()
    assert real.ok, real.detail  # this host has them
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    missing = check_headers()
    assert not missing.ok and missing.line().endswith("apt-get install -y python3-dev")

