"""``--commits GOOD..BAD``: a binary search over an engine checkout's commits, as ``git
bisect run`` walks them: each probed commit checked out in a detached worktree of its own
(the checkout itself is never moved, and must be clean), its code imported from there."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.bisect.verdict import Step, Verdict
from harness.errors import HarnessError, UsageError
from harness.process.git import git as run_git

Probe = Callable[[str, Path], Step]  # (commit, its worktree) -> the step's verdict


def git(repo: Path, *args: str) -> str:
    try:
        return run_git(repo, *args, timeout_s=120)
    except HarnessError as error:  # the same kind, named for the flag and the checkout
        raise type(error)(f"--commits: {error} (in {repo})") from None


def commits_between(repo: Path, span: str) -> tuple[str, list[str]]:
    """GOOD and the commits after it up to BAD, oldest first (BAD last); a dirty tree,
    an unknown ref or an empty range is a UsageError."""
    good, sep, bad = span.partition("..")
    if not sep or not good or not bad:
        raise UsageError(f"--commits {span}: expected GOOD..BAD")
    if not (repo / ".git").exists():
        raise UsageError(f"--repo {repo}: not a git checkout")
    dirty = git(repo, "status", "--porcelain", "--untracked-files=no").strip()
    if dirty:
        first = dirty.splitlines()[0].strip()
        raise UsageError(f"--repo {repo}: the tree has uncommitted changes ({first}, ...); "
                         "commit or stash them: each commit is judged as committed")
    good_sha = git(repo, "rev-parse", "--verify", f"{good}^{{commit}}").strip()
    bad_sha = git(repo, "rev-parse", "--verify", f"{bad}^{{commit}}").strip()
    between = git(repo, "rev-list", "--ancestry-path", "--reverse", f"{good_sha}..{bad_sha}")
    shas = between.split()
    if not shas:
        raise UsageError(f"--commits {span}: {bad} does not descend from {good}")
    return good_sha, shas


def label(repo: Path, sha: str) -> str:
    return git(repo, "log", "-1", "--format=%h %s", sha).strip()[:60]


def at_commit(repo: Path, sha: str, work: Path, probe: Probe) -> Step:
    """Probe one commit in a detached worktree, removed afterwards."""
    tree = work / f"tree-{sha[:12]}"
    git(repo, "worktree", "add", "--detach", "--force", str(tree), sha)
    try:
        return probe(sha, tree)
    finally:
        git(repo, "worktree", "remove", "--force", str(tree))
        shutil.rmtree(tree, ignore_errors=True)


@dataclass(frozen=True, kw_only=True)
class Found:
    """What the search ended with: the steps probed (in the order run) and the commits the
    first bad one may be, oldest first. None: the ends do not hold (GOOD bad, BAD good, or
    either unjudged). One: the first bad commit. More: the commits between the last good
    and the first bad one could not be judged (skipped, or their run could not run), so the
    first bad is any of them or the first bad judged, the last one (what ``git bisect``
    answers when "there are only 'skip'ped commits left to test"): naming that last one
    alone would blame a commit the search never cleared."""

    steps: list[Step]
    suspects: list[str]


def next_probe(low: int, high: int, unjudged: set[int]) -> int | None:
    """The commit to probe between ``low`` (good) and ``high`` (bad): the one nearest the
    middle that is not known unjudged, either side of it (a skipped middle must not hide
    the commits below it); None when only unjudged commits are left between them. With
    nothing skipped this is the halving's own choice, ``(low + high) // 2``."""
    middle = (low + high) / 2
    left = [i for i in range(low + 1, high) if i not in unjudged]
    return min(left, key=lambda i: (abs(i - middle), i), default=None)


def search(repo: Path, good: str, shas: list[str], work: Path,
           probe: Probe, say: Callable[[Step], None]) -> Found:
    """Check both ends, then halve, probing past unjudged commits as ``git bisect skip``
    does; what is left between the last good and the first bad commit is the answer."""
    steps: list[Step] = []

    def judge(sha: str) -> Verdict:
        step = at_commit(repo, sha, work, probe)
        steps.append(step)
        say(step)
        return step.verdict

    if judge(good) is not Verdict.GOOD or judge(shas[-1]) is not Verdict.BAD:
        return Found(steps=steps, suspects=[])
    low, high = -1, len(shas) - 1  # shas[low] good (-1: GOOD itself), shas[high] bad
    unjudged: set[int] = set()
    while (mid := next_probe(low, high, unjudged)) is not None:
        verdict = judge(shas[mid])
        if verdict is Verdict.GOOD:
            low = mid
        elif verdict is Verdict.BAD:
            high = mid
        else:
            unjudged.add(mid)  # as git bisect skip: judged neither way
    return Found(steps=steps, suspects=shas[low + 1:high + 1])
