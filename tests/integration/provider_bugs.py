"""What the bug-injection tests share: the field's parity tolerances (vLLM's defaults, as
the suite's cpu matrix has them) and a run of a suite with a buggy provider plugged in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "suites" / "kernel_parity"


class Tol:
    def __init__(self, atol: float, rtol: float) -> None:
        self.atol, self.rtol, self.bitwise, self.source = atol, rtol, False, "test"


TOLS = {torch.float32: Tol(1e-5, 1.3e-6), torch.bfloat16: Tol(1e-3, 1.6e-2),
        torch.float16: Tol(1e-3, 1e-3), torch.float8_e4m3fn: Tol(0.1, 0.1),
        torch.float8_e4m3fnuz: Tol(0.1, 0.1)}


def tolerance(dtype: torch.dtype, op: str) -> Tol:
    return TOLS[dtype]


def run_suite_with(tmp_path: Path, name: str, source: str, test_file: str,
                   *pytest_args: str) -> subprocess.CompletedProcess[str]:
    """The kernel-parity suite file run under the cpu platform with provider ``name``
    (module ``<name>_provider``, from ``source``) brought in as the suite brings any."""
    (tmp_path / f"{name}_provider.py").write_text(source)
    env = dict(os.environ,
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
               REFENGINE_PROVIDER_MODULES=f"{name}={name}_provider",
               KERNEL_PARITY_PROVIDERS=name)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--platform", "cpu", str(SUITE / test_file),
         *pytest_args, "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
