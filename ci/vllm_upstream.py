#!/usr/bin/env python3
"""vLLM's own CPU kernel tests, pinned to v0.32.0, through the bring-your-own-suite path.

The tests come from vLLM's source distribution on the package index (pinned by URL and
sha256, fetched once into the harness's download cache; nothing of vLLM is kept in this
repository): ``tests/`` is unpacked beside a project of the user's own
(``[tool.harness]`` in its pyproject.toml) whose matrix extends the shipped ``vllm-cpu``
and names two suites, and ``harness run`` runs them as it runs any user's tree:

- tests/kernels/core/test_cpu_activation.py (silu/gelu/... against vLLM's torch refs)
- tests/kernels/test_onednn.py (oneDNN linear and int8 W8A8), its three largest GEMM
  shapes (N x K = 4096 x 4096, 16384 x 4096, 64128 x 4096) left out for time

    python ci/vllm_upstream.py --out DIR [-- HARNESS_RUN_ARGS]

Exit: harness run's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.platform.images_fetch import cache_dir, fetch_verified  # noqa: E402

VERSION = "0.32.0"
SDIST = ("https://files.pythonhosted.org/packages/d5/df/"
         "5471312c76e335eaa2b8333e87ea39f0d37bfe24f10a582620e34ff12e33/vllm-0.32.0.tar.gz")
SHA256 = "d2c957d5eee3d0985012151315ddc62cbe0cd368fc96a5fc3510438d9dddf2ad"
BIG = ("4096-4096", "16384-4096", "64128-4096")

MATRIX = """\
extends: vllm-cpu.yaml
description: vLLM {version}'s own CPU kernel tests on vLLM's CPU build.
suites:
  vllm_activation:
    path: {tests}/kernels/core/test_cpu_activation.py
    rootdir: {src}
    workers: 1
    timeout_s: 1800
    tier: full
    enabled: true
  vllm_onednn:
    path: {tests}/kernels/test_onednn.py
    rootdir: {src}
    workers: 1
    timeout_s: 1800
    k: "{keyword}"
    tier: full
    enabled: true
known_failures+:
  - id: tests/kernels/test_onednn.py::test_onednn_gemm[*]
    reason: >-
      vLLM's own oneDNN GEMM test runs bfloat16 only, and onednn_mm in bfloat16 raises
      "could not create a primitive descriptor for the matmul primitive" where oneDNN has no
      AVX-512 (seen on an AMD EPYC Zen 1, AVX2 only): every case fails there, none on the
      Intel AVX-512 hosts vLLM's own CI runs this file on (the vllm-cpu lane's linear finding)
    issue: "#32"
    owner: kernels
    expires: 2027-06-30
    action: xfail
    host:
      cpu_flags_absent: [avx512f]
    expect:
      raises: RuntimeError
      match: "could not create a primitive descriptor for the matmul primitive"
"""


def unpack_tests(dest: Path) -> Path:
    """vLLM's ``tests/`` (and nothing else) under ``dest``: the sdist's root folder."""
    src = dest / f"vllm-{VERSION}"
    if (src / "tests" / "conftest.py").is_file():
        return src
    archive = cache_dir() / f"vllm-{VERSION}.tar.gz"
    if not archive.is_file():
        fetch_verified(SDIST, SHA256, archive, matrix="vllm-upstream", out=sys.stdout)
    prefix = f"vllm-{VERSION}/tests/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(dest, members=members, filter="data")
    return src


def project(out: Path) -> Path:
    """The user's project: pyproject.toml with [tool.harness], matrices/vllm-upstream.yaml."""
    src = unpack_tests(out / "src")
    top = out / "project"
    (top / "matrices").mkdir(parents=True, exist_ok=True)
    (top / "pyproject.toml").write_text('[project]\nname = "vllm-upstream"\nversion = "0"\n\n'
                                        "[tool.harness]\n")
    keyword = " and ".join(f"not {shape}" for shape in BIG)
    (top / "matrices" / "vllm-upstream.yaml").write_text(
        MATRIX.format(version=VERSION, tests=src / "tests", src=src, keyword=keyword))
    return top


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    top = project(args.out.resolve())
    extra = [a for a in args.rest if a != "--"]
    argv = [sys.executable, "-m", "harness", "run", "--matrix", "vllm-upstream", "--suite",
            "vllm_activation", "--suite", "vllm_onednn", *extra]
    print(f"vllm-upstream: {' '.join(argv[1:])} (in {top})", flush=True)
    return subprocess.run(argv, cwd=top, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
