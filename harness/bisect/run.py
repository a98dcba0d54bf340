"""The two walks of ``harness bisect`` and what they print; on speed (``--slower-than``),
each step judged by bisect/verdict.py ``SpeedJudge``."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from itertools import takewhile
from pathlib import Path

from harness.bisect.commits import label, search
from harness.bisect.steps import Where, run_step
from harness.bisect.verdict import NoSpeed, SpeedJudge, Step, Verdict, first_change
from harness.errors import Exit


def work_folder(reports: Path | None, root: Path) -> Path:
    """``<reports>/bisect/<UTC time>-<pid>/``: each step's run folder and log."""
    base = reports if reports is not None else root / "reports"
    work = base / "bisect" / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    return work


def walk_in(reports: Path | None, root: Path, walk: Callable[[Path], int]) -> int:
    """``walk`` in a new work folder; a bisect on speed refused once its steps began (the
    GOOD end recorded no speed: ``NoSpeed``, exit 2) leaves nothing: its work folder is
    taken away, and each folder made for it that is empty then."""
    base = reports if reports is not None else root / "reports"
    made = list(takewhile(lambda p: not p.exists(), [base / "bisect", base, *base.parents]))
    work = work_folder(reports, root)
    try:
        return walk(work)
    except NoSpeed:
        shutil.rmtree(work, ignore_errors=True)
        for folder in made:  # innermost first; one another bisect writes in stays
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _say(step: Step) -> None:
    print(f"harness: bisect: {step.line()}", flush=True)


Judge = Callable[[Step], Step]  # a step's pass/fail verdict -> the verdict the bisect uses


def _judge(test: str, slower: float | None) -> Judge:
    return (lambda step: step) if slower is None else SpeedJudge(test=test, factor=slower)


def _on_speed(slower: float | None) -> str:
    return "" if slower is None else (f" on speed (bad at {slower:g}x the GOOD end's ratio "
                                      "or slower)")


def bisect_pins(matrix: str, test: str, pins: list[str], *, python: str, root: Path,
                work: Path, slower: float | None = None) -> int:
    """Each pin in order (oldest first); exit 0 with the change, 1 with none, 3 when a pin
    could not be installed (named, left out of the verdict). On speed the first pin whose
    test passed is the GOOD end, its ratio the reference."""
    print(f"harness: bisect {test} on matrix {matrix} over {', '.join(pins)}"
          f"{_on_speed(slower)} (steps: {work})")
    where = Where(matrix=matrix, test=test, work=work, python=python, cwd=root)
    judge = _judge(test, slower)
    steps = []
    for pin in pins:
        slug = pin.replace("==", "-").replace("/", "_")
        step = judge(run_step(where, pin, slug, ["--pin", pin]))
        _say(step)
        steps.append(step)
    return _conclude(steps, unit="release")


def bisect_commits(matrix: str, test: str, repo: Path, good: str, shas: list[str], *,
                   python: str, work: Path, slower: float | None = None) -> int:
    """The halving over the commits; exit 0 with the first bad commit, 1 when the ends do
    not hold (3 when an end could not be judged: nothing was decided), 3 when only
    unjudged commits are left between the last good and the first bad one (each named:
    the first bad is any of them, or the first bad judged)."""
    print(f"harness: bisect {test} on matrix {matrix} over {len(shas)} commits of {repo}"
          f"{_on_speed(slower)} (steps: {work})")
    judge = _judge(test, slower)

    def probe(sha: str, tree: Path) -> Step:
        env = dict(os.environ, HARNESS_ROOT=str(tree),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(tree),
                                                            os.environ.get("PYTHONPATH")])))
        where = Where(matrix=matrix, test=test, work=work, python=python, cwd=tree, env=env)
        return judge(run_step(where, label(repo, sha), sha[:12]))

    found = search(repo, good, shas, work, probe, _say)
    if not found.suspects:
        ends = {s.label: s for s in found.steps}
        unsure = any(s.verdict is Verdict.UNRUN for s in found.steps)
        rule = ("GOOD must pass, BAD must fail" if slower is None else
                f"GOOD must pass with a speed, BAD be {slower:g}x its ratio or slower")
        print(f"harness: bisect: the ends do not hold ({rule}): "
              + "; ".join(f"{k} {v.verdict.value}" for k, v in ends.items())
              + ("; an end that could not be judged decides nothing" if unsure else ""))
        return Exit.INFRA if unsure else Exit.FAILED
    if len(found.suspects) == 1:
        print(f"harness: bisect: first bad commit: {label(repo, found.suspects[0])}")
        return Exit.OK
    *unjudged, first_bad = (label(repo, sha) for sha in found.suspects)
    print(f"harness: bisect: only unjudged commits are left between the last good and the "
          f"first bad one: {_any_of('first bad commit', unjudged, f'{first_bad} (bad)')}")
    return Exit.INFRA


def _any_of(what: str, unjudged: list[str], judged: str) -> str:
    """``git bisect``'s answer when only skipped commits are left: every candidate named."""
    candidates = [f"{name} (not judged)" for name in unjudged] + [judged]
    return f"the {what} could be any of: {'; '.join(candidates)}"


def _conclude(steps: list[Step], *, unit: str) -> int:
    """The verdict over the pins, the unjudged ones named: exit 0 with the change, 1 with
    none, 3 when a pin could not be installed or run, or the change lies across unjudged
    pins (the first bad is any of them, or the first bad judged)."""
    infra = any(s.infra for s in steps)
    unjudged = [s.label for s in steps if s.verdict is Verdict.UNRUN]
    not_judged = f"; not judged: {', '.join(unjudged)}" if unjudged else ""
    change = first_change(steps)
    if change is None:
        verdicts = {s.verdict.value for s in steps if s.verdict is not Verdict.UNRUN}
        judged = (f"every {unit} judged is {' / '.join(sorted(verdicts))}" if verdicts
                  else f"no {unit} could be judged")
        print(f"harness: bisect: no change: {judged}{not_judged}")
        return Exit.INFRA if infra else Exit.FAILED
    before, after = change
    word = "first bad" if after.verdict is Verdict.BAD else "first good"
    across = [s.label for s in steps[steps.index(before) + 1:steps.index(after)]]
    if across:
        print(f"harness: bisect: the change lies across {unit}s that could not be judged: "
              + _any_of(f"{word} {unit}", across, f"{after.label} ({after.verdict.value}), "
                        f"after {before.label} ({before.verdict.value})"))
        return Exit.INFRA
    aside = f"{not_judged} (the change does not lie there)" if unjudged else ""
    print(f"harness: bisect: {word} {unit}: {after.label} (after {before.label}, "
          f"{before.verdict.value}){aside}")
    return Exit.INFRA if infra else Exit.OK
