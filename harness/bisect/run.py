"""The two walks of ``harness bisect`` and what they print."""

from __future__ import annotations

import os
import time
from pathlib import Path

from harness.bisect.commits import label, search
from harness.bisect.steps import Where, run_step
from harness.bisect.verdict import Step, Verdict, first_change


def work_folder(reports: Path | None, root: Path) -> Path:
    """``<reports>/bisect/<UTC time>-<pid>/``: each step's run folder and log."""
    base = reports if reports is not None else root / "reports"
    work = base / "bisect" / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    return work


def _say(step: Step) -> None:
    print(f"harness: bisect: {step.line()}", flush=True)


def bisect_pins(matrix: str, test: str, pins: list[str], *, python: str, root: Path,
                work: Path) -> int:
    """Each pin in order (oldest first); exit 0 with the change, 1 with none, 3 when a pin
    could not be installed (named, left out of the verdict)."""
    print(f"harness: bisect {test} on matrix {matrix} over {', '.join(pins)} (steps: {work})")
    where = Where(matrix=matrix, test=test, work=work, python=python, cwd=root)
    steps = []
    for pin in pins:
        slug = pin.replace("==", "-").replace("/", "_")
        step = run_step(where, pin, slug, ["--pin", pin])
        _say(step)
        steps.append(step)
    return _conclude(steps, unit="release", infra=any(s.infra for s in steps))


def bisect_commits(matrix: str, test: str, repo: Path, good: str, shas: list[str], *,
                   python: str, work: Path) -> int:
    print(f"harness: bisect {test} on matrix {matrix} over {len(shas)} commits of {repo} "
          f"(steps: {work})")

    def probe(sha: str, tree: Path) -> Step:
        env = dict(os.environ, HARNESS_ROOT=str(tree),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(tree),
                                                            os.environ.get("PYTHONPATH")])))
        where = Where(matrix=matrix, test=test, work=work, python=python, cwd=tree, env=env)
        return run_step(where, label(repo, sha), sha[:12])

    steps, first_bad = search(repo, good, shas, work, probe, _say)
    if first_bad is None:
        ends = {s.label: s for s in steps}
        print("harness: bisect: the ends do not hold (GOOD must pass, BAD must fail): "
              + "; ".join(f"{k} {v.verdict.value}" for k, v in ends.items()))
        return 1
    print(f"harness: bisect: first bad commit: {label(repo, first_bad)}")
    return 0


def _conclude(steps: list[Step], *, unit: str, infra: bool) -> int:
    change = first_change(steps)
    if change is None:
        verdicts = {s.verdict.value for s in steps if s.verdict is not Verdict.UNRUN}
        print(f"harness: bisect: no change: every {unit} judged is "
              f"{' / '.join(sorted(verdicts)) or 'unjudged'}")
        return 3 if infra else 1
    before, after = change
    word = "first bad" if after.verdict is Verdict.BAD else "first good"
    print(f"harness: bisect: {word} {unit}: {after.label} (after {before.label}, "
          f"{before.verdict.value})")
    return 3 if infra else 0
