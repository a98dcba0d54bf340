"""The checkout's commit and whether it is dirty, for manifests and repro."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.process.run import run_captured


@dataclass(frozen=True)
class GitInfo:
    sha: str | None
    dirty: bool | None


def _git(root: Path, *args: str) -> str | None:
    try:
        done = run_captured(["git", "-c", "core.fileMode=false", "-C", str(root), *args],
                            timeout_s=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def head_sha(root: Path) -> str | None:
    sha = _git(root, "rev-parse", "HEAD")
    return None if sha is None else sha.strip()


def git_info(root: Path) -> GitInfo:
    sha = head_sha(root)
    if sha is None:
        return GitInfo(None, None)
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return GitInfo(sha, None if status is None else bool(status.strip()))


def untracked_files(root: Path) -> frozenset[str] | None:
    """Files git does not track and does not ignore (repository-relative); None without git."""
    out = _git(root, "status", "--porcelain", "--untracked-files=all", "-z")
    if out is None:
        return None
    return frozenset(entry[3:] for entry in out.split("\0") if entry.startswith("?? "))
