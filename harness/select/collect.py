"""The test ids of a lane, by pytest's own collection (``harness select --collect``).

Collected in the given interpreter with the lane's matrix (``--platform``), so
parametrized ids are exactly the ones a run of that lane has. A GPU lane is collected
here as written (its ids name its device); collection needs no device.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.errors import InfraError
from harness.matrix.suite_paths import suite_target
from harness.process.run import run_captured


def collect(python: str, root: Path, lane: str, paths: Sequence[str],
            *, timeout_s: float = 600) -> list[str]:
    """One pytest per suite path: suites import their own ``conftest`` helpers by that
    module name, which would collide in one process (as in a run, one pytest a suite)."""
    ids: list[str] = []
    for path in paths:
        ids += _collect_one(python, root, lane, path, timeout_s=timeout_s)
    return ids


def _collect_one(python: str, root: Path, lane: str, path: str,
                 *, timeout_s: float) -> list[str]:
    argv = [python, "-m", "pytest", "--collect-only", "-q", "-p", "harness.pytest_entry",
            "-p", "no:cacheprovider", f"--rootdir={root}", "--platform", lane,
            str(suite_target(path, root))]
    env = os.environ | {"PYTHONPATH": os.pathsep.join(
        filter(None, [str(root), os.environ.get("PYTHONPATH")])), "TRITON_INTERPRET": "1"}
    try:
        proc = run_captured(argv, cwd=root, env=env, timeout_s=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InfraError(f"collecting {lane}: {error}") from None
    ids = [line.strip() for line in proc.stdout.splitlines() if "::" in line]
    if proc.returncode not in (0, 5) or (not ids and proc.returncode != 5):
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        raise InfraError(f"collecting {lane} failed (exit {proc.returncode}): "
                         + " | ".join(tail))
    return ids
