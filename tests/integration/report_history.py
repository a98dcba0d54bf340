"""Build a small history of several nights from real pytest runs, plus synthetic twists.

Each night of each platform is a run folder (manifest.json, matrix.json, junit/*.xml)
written by running pytest with ``--junitxml`` on two small suites whose outcomes
depend on the platform and the night: a regression, a flake, a failure streak, an
infrastructure crash, a suite that only skips, fusion-count drift, tolerance headroom.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

KERNEL_SUITE = """
import os
import pytest

NIGHT = int(os.environ["NIGHT"])
PLATFORM = os.environ["PLATFORM"]
DEVICE = "cpu" if PLATFORM == "cpu" else "cuda:0"
CRASH = os.environ.get("CRASH") == "1"


@pytest.mark.parametrize("device", [DEVICE])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rms_norm(device, dtype, record_property):
    record_property("op", "rms_norm")
    record_property("dtype", dtype)
    record_property("provider", "native")
    record_property("requires", "triton")
    headroom = 0.93 if dtype == "bfloat16" else 0.2 + 0.1 * NIGHT
    record_property("headroom", headroom)
    record_property("max_abs_err", headroom * 1e-3)
    record_property("atol", 1e-3)


def test_regresses_tonight():
    assert not (PLATFORM == "cpu" and NIGHT == 2), "rms_norm output drifted"


def test_flips():
    assert not (PLATFORM == "cpu" and NIGHT % 2 == 1), "race in the allocator"


def test_keeps_failing():
    assert not (PLATFORM == "cpu" and NIGHT >= 1), "wrong provider selected"


def test_fixed_now():
    pass


def test_hangs_once():
    if CRASH:
        raise RuntimeError("HSA_STATUS_ERROR_EXCEPTION: GPU hang detected")


def test_needs_fp8(record_property):
    if PLATFORM == "cpu":
        pytest.skip("cpu does not provide fp8_e4m3fnuz")
    record_property("requires", "fp8_e4m3fnuz")


@pytest.mark.skipif(PLATFORM != "cpu", reason="cpu-only test")
def test_cpu_only():
    pass
"""

FUSION_SUITE = """
import os
import pytest

NIGHT = int(os.environ["NIGHT"])
PLATFORM = os.environ["PLATFORM"]


def test_add_rms_norm(record_property):
    if PLATFORM == "rocm":
        pytest.skip("rocm does not provide inductor")
    found = 2 if NIGHT < 2 else 1
    record_property("fusion.add_rms_norm.expected", 2)
    record_property("fusion.add_rms_norm.found", found)
    assert True


def test_silu_mul_quant():
    if PLATFORM == "rocm":
        pytest.skip("rocm does not provide inductor")
"""


def matrix_json(platform: str, today: dt.date) -> dict[str, object]:
    catalog = {
        "fp8": {"description": "some fp8"},
        "fp8_e4m3fnuz": {"parent": "fp8", "hardware": True},
        "triton": {},
        "cuda_graphs": {"hardware": True},
        "inductor": {},
    }
    provides = (
        ["triton", "inductor"] if platform == "cpu" else ["triton", "fp8_e4m3fnuz", "cuda_graphs"]
    )
    known = []
    if platform == "cpu":
        known = [
            {
                "id": "*::test_fixed_now",
                "reason": "issue 7 fixed upstream?",
                "issue": "#7",
                "owner": "kernels",
                "expires": (today + dt.timedelta(days=60)).isoformat(),
                "action": "xfail",
            },
            {
                "id": "*::test_not_here*",
                "reason": "flaky driver",
                "owner": "infra",
                "expires": (today + dt.timedelta(days=3)).isoformat(),
                "action": "skip",
            },
        ]
    return {
        "name": platform,
        "device": "cpu" if platform == "cpu" else "cuda",
        "capability_catalog": catalog,
        "capabilities": {"provides": provides},
        "suites": {
            "kernel": {"enabled": True},
            "fusion": {"enabled": True},
            "e2e": {"enabled": platform == "cpu"},
        },
        "known_failures": known,
    }


def _pytest(test_file: Path, junit: Path, env: dict[str, str], *extra: str) -> int:
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(test_file),
        f"--junitxml={junit}",
        *extra,
        "-o",
        "junit_family=xunit1",
        "-p",
        "no:cacheprovider",
        "-q",
        "-p",
        "no:randomly",
        "--rootdir",
        str(test_file.parent),
    ]
    result = subprocess.run(
        command,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=test_file.parent,
    )
    return result.returncode


def make_history(root: Path, now: dt.datetime) -> list[Path]:
    """Three nights of cpu and rocm; returns the run folders, oldest first."""
    suites = root / "suites"
    suites.mkdir(parents=True)
    (suites / "test_kernel.py").write_text(KERNEL_SUITE)
    (suites / "test_fusion.py").write_text(FUSION_SUITE)
    folders: list[Path] = []
    for night in range(3):
        started = now - dt.timedelta(days=3 - night)
        for platform in ("cpu", "rocm"):
            run_id = f"{started:%Y%m%dT%H%M%SZ}-{platform}{night}"
            folder = root / "reports" / platform / run_id
            (folder / "junit").mkdir(parents=True)
            crash = platform == "rocm" and night == 1
            env = {"NIGHT": str(night), "PLATFORM": platform, "CRASH": "1" if crash else "0"}
            outcomes = []
            for suite, test_file in (("kernel", "test_kernel.py"), ("fusion", "test_fusion.py")):
                junit = folder / "junit" / f"{suite}.xml"
                # On rocm the cpu-only test is deselected: it must show as never ran.
                extra = ("-k", "not test_cpu_only") if platform == "rocm" else ()
                code = _pytest(suites / test_file, junit, env, *extra)
                status = "passed" if code == 0 else "failed"
                if crash and suite == "kernel":
                    status, code = "crashed", 134
                outcomes.append(
                    {
                        "suite": suite,
                        "status": status,
                        "exit_code": code,
                        "duration_s": 1.0,
                        "reason": "exit 134 (GPU hang)" if crash and suite == "kernel" else None,
                        "junit": f"junit/{suite}.xml",
                    }
                )
            if platform == "cpu":
                # e2e ran but wrote no JUnit: an infrastructure failure, not a test result.
                outcomes.append(
                    {
                        "suite": "e2e",
                        "status": "no-junit",
                        "exit_code": 0,
                        "duration_s": 0.5,
                        "reason": "no JUnit written",
                        "junit": "junit/e2e.xml",
                    }
                )
            manifest = {
                "schema": 1,
                "run_id": run_id,
                "matrix": {"name": platform, "hash": "0" * 64, "file": f"{platform}.yaml"},
                "platform": platform,
                "family": "cpu" if platform == "cpu" else "rocm",
                "emulate": False,
                "runner": "local",
                "image": None,
                "git": {"sha": f"sha{night}", "dirty": False},
                "torch": "2.13.0",
                "device_fingerprint": f"{platform}-fp",
                "started": started.isoformat(),
                "ended": (started + dt.timedelta(minutes=5)).isoformat(),
                "suites": outcomes,
                "status": "infra-error" if crash else "done",
                "exit_code": 3 if crash else 1,
                "infra_error": {"kind": "gpu_hang", "message": "amdgpu: ring gfx timeout"}
                if crash
                else None,
            }
            (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
            (folder / "matrix.json").write_text(json.dumps(matrix_json(platform, now.date())))
            folders.append(folder)
    return folders
