"""``git`` as every room runs it: through the one process helper, its output read whole."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.errors import InfraError, UsageError
from harness.process.run import run_captured


def git(repo: Path, *args: str, timeout_s: float = 60) -> str:
    """The output of ``git -C repo ARGS``. A git that cannot run (or hangs) is an
    InfraError, one that refuses a UsageError, each naming the command and git's last line."""
    try:
        done = run_captured(["git", "-C", str(repo), *args], timeout_s=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InfraError(f"git {' '.join(args)}: {error}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise UsageError(f"git {' '.join(args)}: {why}")
    return done.stdout
