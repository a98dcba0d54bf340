"""Is the checkout clean? CI steps must test exactly the commit they report.

Dirty means modified, staged, or untracked and not ignored. A file whose only change
is its mode is clean: checkouts on filesystems without an executable bit (and agents
that chmod their scripts) flip modes without changing what runs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from harness.errors import InfraError
from harness.process.run import run_captured

_TIMEOUT_S = 60


def dirty_paths(path: Path) -> list[str]:
    """``git status --porcelain`` lines for a dirty checkout; empty when clean.

    Raises InfraError when git is missing, ``path`` is not in a work tree, or the
    repository cannot be read.
    """
    git = shutil.which("git")
    if git is None:
        raise InfraError("git not found on PATH; cannot tell whether the checkout is clean")
    if not path.is_dir():
        raise InfraError(f"{path}: not a directory")
    command = [git, "-c", "core.fileMode=false", "-C", str(path), "status", "--porcelain=v1",
               "--untracked-files=all", "--ignore-submodules=none"]
    try:
        done = run_captured(command, timeout_s=_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise InfraError(f"{path}: git status took over {_TIMEOUT_S}s") from None
    except OSError as error:
        raise InfraError(f"{path}: cannot run git ({error.strerror or error})") from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise InfraError(f"{path}: git status failed: {reason}")
    return [line for line in done.stdout.splitlines() if line.strip()]
