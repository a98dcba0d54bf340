"""The files a change touches: ``git diff REF`` plus untracked files, repo-relative."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.errors import InfraError, UsageError
from harness.process.run import run_captured


def _git(root: Path, *args: str) -> str:
    try:
        proc = run_captured(["git", "-C", str(root), *args], timeout_s=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InfraError(f"git {' '.join(args)}: {error}") from None
    if proc.returncode != 0:
        message = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        raise UsageError(f"git {' '.join(args)}: {message}")
    return proc.stdout


def resolve_ref(root: Path, ref: str) -> str:
    """The commit ``ref`` names (what every shard of a pipeline must diff against)."""
    if ref.startswith("-"):
        raise UsageError(f"--changed-since {ref!r}: expected a git revision")
    out = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
    if not out:
        raise UsageError(f"--changed-since {ref}: not a commit in {root}")
    return out


def changed_files(root: Path, ref: str) -> list[str]:
    """Files that differ between ``ref`` and the working tree (both sides of a rename),
    plus untracked files that are not ignored."""
    commit = resolve_ref(root, ref)
    out: list[str] = []
    diff = _git(root, "diff", "--name-status", "--no-renames", "-z", commit, "--")
    fields = diff.split("\0")
    i = 0
    while i + 1 < len(fields):
        out.append(fields[i + 1])
        i += 2
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z")
    out += [p for p in untracked.split("\0") if p]
    return sorted(set(out))
