"""The files a change touches: ``git diff $(git merge-base REF HEAD)`` plus untracked
files, repo-relative.

A change is what the branch did since it left REF (what a pull request shows), not the
difference to REF's tip: a branch behind its target would otherwise claim the target's
newer commits as its own change.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.errors import InfraError, UsageError
from harness.process.git import git
from harness.process.run import run_captured


def _git(root: Path, *args: str) -> str:
    return git(root, *args, timeout_s=60)


def resolve_ref(root: Path, ref: str) -> str:
    """The commit ``ref`` names (what every shard of a pipeline must diff against)."""
    if ref.startswith("-"):
        raise UsageError(f"--changed-since {ref!r}: expected a git revision")
    out = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
    if not out:
        raise UsageError(f"--changed-since {ref}: not a commit in {root}")
    return out


def merge_base(root: Path, ref: str) -> str:
    """The commit where HEAD left ``ref`` (``ref`` itself when HEAD is ahead of it): what
    every step of a pipeline diffs against."""
    commit = resolve_ref(root, ref)
    try:
        proc = run_captured(["git", "-C", str(root), "merge-base", commit, "HEAD"], timeout_s=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InfraError(f"git merge-base {ref} HEAD: {error}") from None
    base = proc.stdout.strip()
    if proc.returncode != 0 or not base:
        # exit 1 and no output: no common ancestor. Never a fallback (REF's tip would claim
        # its own newer commits as the change; every lane would select the wrong tests).
        if _git(root, "rev-parse", "--is-shallow-repository").strip() == "true":
            raise UsageError(f"--changed-since {ref}: no merge base with HEAD in this shallow "
                             f"clone ({root}): fetch the history back to it (git fetch "
                             "--unshallow; actions/checkout: fetch-depth: 0)")
        raise UsageError(f"--changed-since {ref}: {ref} and HEAD share no history in {root} "
                         "(unrelated histories): there is no change to select by")
    return base


def changed_files(root: Path, ref: str) -> list[str]:
    """Files that differ between the merge base of ``ref`` and HEAD and the working tree
    (both sides of a rename), plus untracked files that are not ignored."""
    commit = merge_base(root, ref)
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
