"""``harness run --skip-unavailable`` skips a host that is not the matrix's, and nothing else.

A nightly lane on a pool of mixed hosts turns "this host is not theirs" (the zen probe on a
non-Zen CPU, a GPU matrix where there is no GPU) into a run folder marked skipped, exit 0.
Every other failure before the suites keeps its exit code (3) and its own line: a probe that
could not run or be read, a Docker engine that does not answer, a pin pip cannot resolve, a
cold tokenizer cache. Were the flag widened to any of them, a broken agent would go quietly
green. Each case is a real ``harness run`` in a subprocess, with a home of its own (nothing
built) and, for the zen lane, an ``lscpu`` first on PATH that prints a host's capture or
fails as a broken one would.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

PROBES = Path(__file__).resolve().parents[1] / "data" / "probe"
ZEN3_REFUSAL = "probe: expected CPU flags avx512_bf16, avx512_vnni, not reported"


def _lscpu(tmp_path: Path, body: str) -> str:
    """A folder holding an ``lscpu`` that runs ``body``, first on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    script = folder / "lscpu"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    return subprocess.run(
        [sys.executable, "-m", "harness", "run", *args, "--skip-unavailable",
         "--reports", str(tmp_path / "r")],
        env={**base, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / ".cache"),
             **env},
        text=True, capture_output=True, check=False, timeout=240)


def _manifests(tmp_path: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in (tmp_path / "r").glob("*/*/manifest.json")]


@pytest.mark.parametrize(("args", "env", "why"), [
    (("--matrix", "zen", "--suite", "platform"),
     {"lscpu": f"cat '{PROBES / 'lscpu-zen3.json'}'"}, ZEN3_REFUSAL),
    (("--matrix", "cuda", "--suite", "platform"), {}, "no NVIDIA GPU here"),
], ids=["zen-on-zen3", "cuda-without-gpu"])
def test_a_host_that_is_not_the_matrix_s_is_skipped(
        tmp_path: Path, args: tuple[str, ...], env: dict[str, str], why: str) -> None:
    if "cuda" in args and Path("/dev/nvidia0").exists():
        pytest.skip("this host has an NVIDIA GPU: the cuda matrix is its own")
    extra = {"PATH": _lscpu(tmp_path, env["lscpu"])} if "lscpu" in env else {}
    run = _run(tmp_path, *args, **extra)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-2].startswith(f"harness: skipped (--skip-unavailable): {why}")
    (manifest,) = _manifests(tmp_path)
    assert (manifest["status"], manifest["exit_code"]) == ("skipped", 0)


BROKEN_PROBES = {
    # the probe's command fails: nothing was learned about the host
    "lscpu-fails": ("echo 'lscpu: cannot open /proc/cpuinfo' >&2; exit 1",
                    "harness: error: probe lscpu: lscpu exited 1: "
                    "lscpu: cannot open /proc/cpuinfo"),
    # it answers, but not in a form the probe reads
    "lscpu-unreadable": ("echo 'not json'",
                         "harness: error: probe: cannot read lscpu -J output"),
}


@pytest.mark.parametrize("broken", sorted(BROKEN_PROBES))
def test_a_probe_that_cannot_tell_is_an_infrastructure_failure(tmp_path: Path,
                                                               broken: str) -> None:
    body, line = BROKEN_PROBES[broken]
    run = _run(tmp_path, "--matrix", "zen", "--suite", "platform",
               PATH=_lscpu(tmp_path, body))
    assert run.returncode == 3, run.stdout + run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith(line), run.stderr
    assert "skipped" not in run.stdout and not _manifests(tmp_path)


def test_a_docker_engine_that_does_not_answer_keeps_exit_3(tmp_path: Path) -> None:
    run = _run(tmp_path, "--matrix", "cpu", "--suite", "platform", "--docker",
               DOCKER_HOST=f"unix://{tmp_path / 'no-docker.sock'}")
    assert run.returncode == 3, run.stdout + run.stderr
    assert "host is missing what this run needs" in run.stderr
    assert "Docker engine: not answering" in run.stderr
    assert "skipped" not in run.stdout and not _manifests(tmp_path)


def test_a_pin_pip_cannot_resolve_keeps_exit_3(tmp_path: Path) -> None:
    # no index and no wheel folder: pip resolves nothing, at once and offline
    run = _run(tmp_path, "--matrix", "cpu", "--suite", "platform",
               "--pin", "torch==0.0.1", PIP_NO_INDEX="1", PIP_FIND_LINKS="")
    assert run.returncode == 3, run.stdout + run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith(
        "harness: error: --pin torch==0.0.1: pip cannot resolve it here"), run.stderr
    assert "skipped" not in run.stdout and not _manifests(tmp_path)


def test_a_cold_tokenizer_cache_keeps_exit_3(tmp_path: Path) -> None:
    run = _run(tmp_path, "--matrix", "cpu", "--suite", "e2e", "--python", "current")
    assert run.returncode == 3, run.stdout + run.stderr
    assert "cache for matrix cpu is cold or corrupt" in run.stderr
    (manifest,) = _manifests(tmp_path)
    assert (manifest["status"], manifest["exit_code"]) == ("error", 3)
