#!/usr/bin/env python3
"""vLLM's own CPU kernel tests, pinned to v0.32.0, through the bring-your-own-suite path.

The tests come from vLLM's source distribution, fetched with ``pip download --no-deps
--no-binary vllm vllm==VERSION`` (the user's pip configuration applies: an index mirror,
a proxy, a wheel folder), checked against the recorded sha256 and kept in the harness's
download cache (a mismatch: one line, exit 3, nothing kept; nothing of vLLM is kept in
this repository): ``tests/`` is unpacked beside a project of the user's own
(``[tool.harness]`` in its pyproject.toml) whose matrix extends the shipped ``vllm-cpu``
and names two suites, and ``harness run`` runs them as it runs any user's tree:

- tests/kernels/core/test_cpu_activation.py (silu/gelu/... against vLLM's torch refs)
- tests/kernels/test_onednn.py (oneDNN linear and int8 W8A8) through vLLM's own step
  definition: ``harness import buildkite`` of the sdist's .buildkite/hardware_tests/cpu.yaml,
  the "CPU-Kernel Tests" step narrowed to this file (``--only``), its three largest GEMM
  shapes (N x K = 4096 x 4096, 16384 x 4096, 64128 x 4096) left out for time

    python ci/vllm_upstream.py --out DIR [-- HARNESS_RUN_ARGS]

Exit: harness run's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.digest import file_sha256  # noqa: E402
from harness.platform.images_fetch import cache_dir  # noqa: E402

VERSION = "0.32.0"
SHA256 = "d2c957d5eee3d0985012151315ddc62cbe0cd368fc96a5fc3510438d9dddf2ad"

STEP_FILE = ".buildkite/hardware_tests/cpu.yaml"
STEP = "cpu-kernel-tests"  # vLLM's "CPU-Kernel Tests" step: 18 files, Intel CPUs only
ONLY = "tests/kernels/test_onednn.py"  # the step narrowed to the file run here
SUITE = "test_onednn"  # its suite (imported --per-file: named after the file)

# The user's matrix on top of the imported one, as the example project ships it (vLLM's
# activation test, in no step of cpu.yaml, as a suite of its own; the step without its
# largest GEMM shapes; the known failures of vLLM's own tests on the lanes' hosts): one
# file for a maintainer following examples/vllm-upstream/README.md and for this script.
# Its paths name the unpacked sdist as ${VLLM_SRC}.
EXAMPLE = ROOT / "examples" / "vllm-upstream" / "matrices" / "vllm-upstream.yaml"


class SdistMismatch(Exception):
    """The sdist could not be had as recorded (pip failed, the sha256 differs) or its step
    file did not import: one line, exit 3."""


def sdist(version: str = VERSION, sha256: str = SHA256) -> Path:
    """vLLM's sdist in the harness's download cache, through pip, checked by sha256.

    ``--no-binary vllm`` (not ``:all:``, which would build vLLM's build dependencies,
    torch included, from source); pip prepares the sdist's metadata in an isolated build
    environment: ``VLLM_TARGET_DEVICE=empty`` keeps that device-free and
    ``VLLM_SKIP_VERSION_SUFFIX=1`` keeps its version the one asked (else ``+empty``).
    """
    archive = cache_dir() / f"vllm-{version}.tar.gz"
    if archive.is_file():
        if file_sha256(archive) == sha256:
            return archive
        archive.unlink()  # not the recorded file: fetched again, never used
    archive.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "VLLM_TARGET_DEVICE": "empty", "VLLM_SKIP_VERSION_SUFFIX": "1"}
    with tempfile.TemporaryDirectory(dir=archive.parent) as scratch:
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "vllm",
                f"vllm=={version}", "-d", scratch]
        print(f"vllm-upstream: {' '.join(argv[1:])}", flush=True)
        done = subprocess.run(argv, env=env, check=False, capture_output=True, text=True)
        got = Path(scratch) / archive.name
        if done.returncode != 0 or not got.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            raise SdistMismatch(f"vllm-upstream: error: pip download vllm=={version} failed: "
                                f"{tail[0] if tail else done.returncode}")
        digest = file_sha256(got)
        if digest != sha256:
            raise SdistMismatch(f"vllm-upstream: error: {archive.name}: sha256 {digest}, "
                                f"expected {sha256}; nothing kept")
        got.replace(archive)
    return archive


def unpack_tests(dest: Path) -> Path:
    """vLLM's ``tests/``, its CPU step file, and the two files one of the step's tests reads
    (tests/test_zentorch_version_pin.py: setup.py's zentorch pin against
    requirements/cpu.txt's torch) under ``dest``: the sdist's root folder."""
    src = dest / f"vllm-{VERSION}"
    if all((src / part).is_file() for part in ("tests/conftest.py", "setup.py", "PKG-INFO")):
        return src
    archive = sdist()
    prefixes = tuple(f"vllm-{VERSION}/{part}" for part in
                     ("PKG-INFO", "tests/", STEP_FILE, "setup.py", "requirements/"))
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefixes)]
        tar.extractall(dest, members=members, filter="data")
    return src


def project(out: Path) -> tuple[Path, Path]:
    """The user's project (pyproject.toml with [tool.harness], matrices/vllm-upstream.yaml)
    and the unpacked sdist its matrix names as ${VLLM_SRC}."""
    src = unpack_tests(out / "src")
    top = out / "project"
    (top / "matrices").mkdir(parents=True, exist_ok=True)
    (top / "pyproject.toml").write_text('[project]\nname = "vllm-upstream"\nversion = "0"\n\n'
                                        "[tool.harness]\n")
    imported = subprocess.run(
        [sys.executable, "-m", "harness", "import", "buildkite", str(src / STEP_FILE),
         "--step", STEP, "--only", ONLY, "--per-file", "--extends", "vllm-cpu", "--name",
         "vllm-kernels",
         "--out", str(top / "matrices" / "vllm-kernels.yaml")], cwd=top, check=False)
    if imported.returncode != 0:
        raise SdistMismatch(f"vllm-upstream: error: harness import buildkite {STEP_FILE} "
                            f"--step {STEP}: exit {imported.returncode}")
    (top / "matrices" / "vllm-upstream.yaml").write_text(EXAMPLE.read_text())
    return top, src


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    try:
        top, src = project(args.out.resolve())
    except SdistMismatch as error:
        print(error, file=sys.stderr)
        return 3
    extra = [a for a in args.rest if a != "--"]
    argv = [sys.executable, "-m", "harness", "run", "--matrix", "vllm-upstream", "--suite",
            "vllm_activation", "--suite", SUITE, *extra]
    print(f"vllm-upstream: VLLM_SRC={src} {' '.join(argv[1:])} (in {top})", flush=True)
    env = {**os.environ, "VLLM_SRC": str(src)}
    return subprocess.run(argv, cwd=top, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
