"""Helpers shared by the real-engine tests."""

from __future__ import annotations

import dataclasses
import functools
import subprocess
from typing import Any

from harness.matrix import load_matrix
from harness.matrix.model import Matrix, PythonEnv
from harness.roots import project_root

ROOT = project_root().resolve()


@functools.cache
def _cpu() -> Matrix:
    return load_matrix("cpu", ROOT)


def tiny_matrix(**runtime: Any) -> Matrix:
    """The cpu matrix with no suite requirements: the image is the base plus the
    harness's own pins (pytest, pytest-timeout, pytest-xdist, pyyaml)."""
    m = _cpu()
    return dataclasses.replace(
        m, name="dockertest", python=PythonEnv(requirements=(), python="3.11"),
        runtime=dataclasses.replace(m.runtime, **runtime))


def leftovers(label: str) -> str:
    return subprocess.run(["docker", "ps", "-a", "--filter", f"label={label}", "-q"],
                          capture_output=True, text=True, check=True).stdout.strip()
