"""``harness bisect``'s walks (harness/bisect/run.py ``bisect_pins``, ``bisect_commits``,
``walk_in``) and its one step (harness/bisect/steps.py ``run_step``).

A step is a real ``harness run --test ID --python current`` of a scratch project (a
``[tool.harness]`` pyproject, one matrix, one test folder, no torch: about 2 s a step), its
verdict read from the run folder it wrote. The walks' own rules (the order, the slugs, the
lines they print, the exit codes) are checked with ``run_step`` answered in the test
(``answered``) beside one real walk over a real checkout's commits;
tests/integration/test_bisect*.py walk both ends to end through the command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from scratch_repo import commit, git

from harness.bisect import run as walks
from harness.bisect.steps import Where, _last_error, run_step
from harness.bisect.verdict import NoSpeed, Step, Verdict
from harness.errors import Exit, UsageError

G, B, U = Verdict.GOOD, Verdict.BAD, Verdict.UNRUN
MATRIX = """extends: cpu
description: a scratch engine's tests
suites:
  mine: {path: checks, workers: 1, timeout_s: 600}
"""
# A suite of the same tests that needs more memory than any host has: refused, exit 3,
# before its run folder has a manifest.
TOO_BIG = MATRIX.replace("timeout_s: 600", "timeout_s: 600, peak_memory_mb: 90000000")
TESTS = """import os

import engine


def test_engine():
    assert engine.STATE == "good", f"engine state {engine.STATE}"


def test_env():
    assert os.environ.get("STEP_STATE", "good") == "good", "told to fail"
"""
# A run stopped after its test ran, for a reason outside the code under test (as an
# out-of-memory kill): harness run exits 3 with the test's outcome in its run folder.
CONFTEST = """import os
import signal


def pytest_sessionfinish(session):
    if os.environ.get("STEP_KILL"):
        os.kill(os.getpid(), signal.SIGKILL)
"""


def _project(top: Path, state: str = "good") -> Path:
    files = {"pyproject.toml": "[tool.harness]\n", "matrices/mine.yaml": MATRIX,
             "matrices/big.yaml": TOO_BIG, "checks/test_a.py": TESTS,
             "checks/conftest.py": CONFTEST, "engine.py": f"STATE = {state!r}\n"}
    for rel, text in files.items():
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_text(text)
    return top


def _env(top: Path, **extra: str) -> dict[str, str]:
    """This process's environment, the engine importable from the project (as a bisect's
    commit step has it), without this test run's own harness switches."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEP_", "PYTEST_"))}
    return {**env, "PYTHONPATH": str(top), **extra}


def _where(top: Path, work: Path, test: str = "checks/test_a.py::test_env",
           matrix: str = "mine", **extra: str) -> Where:
    return Where(matrix=matrix, test=test, work=work, python="current", cwd=top,
                 env=_env(top, **extra))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return _project(tmp_path / "project")


# -- one step, for real ----------------------------------------------------------------------

def test_a_step_is_good_where_the_test_passed_and_keeps_its_log(project: Path,
                                                                tmp_path: Path) -> None:
    work = tmp_path / "work"
    step = run_step(_where(project, work), "pin-1", "pin-1")
    assert (step.verdict, step.label, step.status, step.infra) == (G, "pin-1", "passed", False)
    assert step.run_dir is not None and step.run_dir.parent.parent == work / "pin-1"
    assert "run folder:" in (work / "pin-1.log").read_text()


def test_a_step_is_bad_where_the_test_failed_with_its_signature(project: Path,
                                                               tmp_path: Path) -> None:
    step = run_step(_where(project, tmp_path / "w", STEP_STATE="bad"), "pin-2", "s2")
    assert (step.verdict, step.status, step.infra) == (B, "failed", False)
    assert "told to fail" in step.signature
    # the same step again (a pin named twice): its own run is read, not the other one,
    # whichever of the two run folders' names sorts last (two runs in one second: their
    # random suffixes decide)
    assert step.run_dir is not None
    shutil.copytree(step.run_dir, step.run_dir.with_name("99991231T235959Z-zzzzzz"))
    again = run_step(_where(project, tmp_path / "w"), "pin-2", "s2")
    assert again.verdict is G and again.run_dir != step.run_dir
    refused = run_step(_where(project, tmp_path / "w", matrix="big"), "pin-2", "s2")
    assert (refused.verdict, refused.infra) == (U, True)


def test_a_refused_run_is_an_unrun_step_with_harness_own_line(project: Path,
                                                              tmp_path: Path) -> None:
    step = run_step(_where(project, tmp_path / "w", matrix="big"), "pin-3", "s3")
    assert (step.verdict, step.infra) == (U, True)
    assert step.status.startswith("could not run (exit 3): suite mine: its tests hold up to")
    assert "harness: error:" not in step.status


def test_a_run_killed_after_its_test_failed_is_unrun_not_bad(project: Path,
                                                            tmp_path: Path) -> None:
    work = tmp_path / "w"
    step = run_step(_where(project, work, STEP_STATE="bad", STEP_KILL="1"), "pin-4", "s4")
    assert sorted(work.glob("s4/*/*/manifest.json"))  # the failure is in its run folder
    assert (step.verdict, step.infra) == (U, True)
    assert step.status.startswith("could not run (exit 3): ")


def test_a_test_in_no_suite_is_a_usage_error_naming_the_step(project: Path,
                                                            tmp_path: Path) -> None:
    where = _where(project, tmp_path / "w", test="elsewhere/test_x.py::test_y")
    with pytest.raises(UsageError) as caught:
        run_step(where, "pin-5", "s5")
    assert str(caught.value).startswith("pin-5: ")
    assert "harness: error:" not in str(caught.value)
    assert "elsewhere/test_x.py" in str(caught.value)


def test_the_step_names_harness_last_error_else_its_last_line() -> None:
    assert _last_error(["a", "harness: error: one", "b", "harness: error: two ", "c"]) == \
        "harness: error: two"
    assert _last_error(["a", "b", " last line "]) == "last line"
    assert _last_error([]) == "no output"


# -- the walks, each step answered ---------------------------------------------------------

@dataclass
class Answered:
    """``run_step`` answered by the test: each step's verdict by its label, in order."""

    verdicts: Mapping[str, Verdict]
    speeds: Mapping[str, float] = field(default_factory=dict)
    calls: list[tuple[Where, str, str, tuple[str, ...]]] = field(default_factory=list)

    def __call__(self, where: Where, label: str, slug: str, extra: tuple[str, ...] = ()
                 ) -> Step:
        self.calls.append((where, label, slug, tuple(extra)))
        key = next(k for k in self.verdicts if label.startswith(k))
        verdict = self.verdicts[key]
        return Step(label=label, verdict=verdict, status=f"{verdict.value}-status",
                    infra=verdict is U, speed=self.speeds.get(key))


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Answered]:
    def install(verdicts: Mapping[str, Verdict], speeds: Mapping[str, float] | None = None
                ) -> Answered:
        answer = Answered(verdicts, speeds or {})
        monkeypatch.setattr(walks, "run_step", answer)
        return answer
    return install


def test_pins_run_in_order_each_under_its_pin_with_its_slug(
        answered: Callable[..., Answered], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    pins = ["eng==1.0", "eng==1.1", "org/eng==1.2"]
    answer = answered({"eng==1.0": G, "eng==1.1": B, "org/eng==1.2": B})
    code = walks.bisect_pins("mine", "t.py::t", pins, python="current", root=tmp_path,
                             work=tmp_path / "w")
    assert code == Exit.OK
    assert [(label, slug, extra) for _, label, slug, extra in answer.calls] == [
        ("eng==1.0", "eng-1.0", ("--pin", "eng==1.0")),
        ("eng==1.1", "eng-1.1", ("--pin", "eng==1.1")),
        ("org/eng==1.2", "org_eng-1.2", ("--pin", "org/eng==1.2"))]
    where = answer.calls[0][0]
    assert (where.matrix, where.test, where.work, where.python, where.cwd, where.env) == (
        "mine", "t.py::t", tmp_path / "w", "current", tmp_path, None)
    assert capsys.readouterr().out.splitlines() == [
        f"harness: bisect t.py::t on matrix mine over eng==1.0, eng==1.1, org/eng==1.2 "
        f"(steps: {tmp_path / 'w'})",
        "harness: bisect: good  eng==1.0: good-status",
        "harness: bisect: bad   eng==1.1: bad-status",
        "harness: bisect: bad   org/eng==1.2: bad-status",
        "harness: bisect: first bad release: eng==1.1 (after eng==1.0, good)"]


def test_pins_on_speed_judge_by_the_good_ends_ratio(
        answered: Callable[..., Answered], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    answered({"eng==1.0": G, "eng==1.1": G, "eng==1.2": G},
             {"eng==1.0": 1.0, "eng==1.1": 1.4, "eng==1.2": 1.5})
    code = walks.bisect_pins("mine", "t", ["eng==1.0", "eng==1.1", "eng==1.2"],
                             python="matrix", root=tmp_path, work=tmp_path, slower=1.5)
    out = capsys.readouterr().out
    assert code == Exit.OK
    assert "on speed (bad at 1.5x the GOOD end's ratio or slower)" in out.splitlines()[0]
    assert "first bad release: eng==1.2 (after eng==1.1, good)" in out


def test_pins_where_none_was_judged_say_so_and_exit_3(
        answered: Callable[..., Answered], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    answered({"eng==1.0": U, "eng==1.1": U})
    assert walks.bisect_pins("mine", "t", ["eng==1.0", "eng==1.1"], python="current",
                             root=tmp_path, work=tmp_path) == Exit.INFRA
    assert capsys.readouterr().out.splitlines()[-1] == (
        "harness: bisect: no change: no release could be judged; not judged: eng==1.0, "
        "eng==1.1")


# -- over commits: a real checkout, each commit's tree imported ------------------------------

@pytest.fixture
def checkout(tmp_path: Path) -> tuple[Path, list[str]]:
    """A project whose engine is good at c0-c1 and bad from c2 to c4; shas oldest first."""
    repo = tmp_path / "repo"
    _project(repo)
    git(repo, "init", "-q")
    shas = []
    for i, state in enumerate(["good", "good", "bad", "bad", "bad"]):
        (repo / "engine.py").write_text(f"STATE = {state!r}  # c{i}\n")
        shas.append(commit(repo, f"c{i}"))
    return repo, shas


def test_commits_find_the_first_bad_one_each_step_run_in_its_own_tree(
        checkout: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo, shas = checkout
    for name in [k for k in os.environ if k.startswith(("STEP_", "PYTEST_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "elsewhere"))
    work = tmp_path / "work"
    work.mkdir()
    code = walks.bisect_commits("mine", "checks/test_a.py::test_engine", repo, shas[0],
                                shas[1:], python="current", work=work)
    out = capsys.readouterr().out.splitlines()
    assert code == Exit.OK, out
    assert out[0] == (f"harness: bisect checks/test_a.py::test_engine on matrix mine over 4 "
                      f"commits of {repo} (steps: {work})")
    verdicts = [line.split()[2] for line in out[1:-1]]
    assert verdicts == ["good", "bad", "bad", "good"]  # c0, c4, then c2, c1
    assert out[-1] == f"harness: bisect: first bad commit: {shas[2][:7]} c2"
    logs = sorted(p.name for p in work.glob("*.log"))
    assert logs == sorted(f"{shas[i][:12]}.log" for i in (0, 1, 2, 4))
    assert not list(work.glob("tree-*"))  # each commit's worktree taken away
    assert git(repo, "worktree", "list").count("\n") == 1


def test_commits_hand_each_step_its_tree_as_root_and_first_on_the_path(
        checkout: tuple[Path, list[str]], answered: Callable[..., Answered], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = checkout
    answer = answered({sha[:7]: v for sha, v in zip(shas, [G, G, B, B, B], strict=True)})
    for before in ("", "/opt/mine"):
        monkeypatch.setenv("PYTHONPATH", before)
        answer.calls.clear()
        walks.bisect_commits("mine", "t", repo, shas[0], shas[1:], python="p",
                             work=tmp_path)
        where, label, slug, extra = answer.calls[0]
        tree = where.cwd
        assert tree is not None and tree.name == f"tree-{shas[0][:12]}"
        assert where.env is not None and where.env["HARNESS_ROOT"] == str(tree)
        assert where.env["PYTHONPATH"] == os.pathsep.join(filter(None, [str(tree), before]))
        assert (where.matrix, where.test, where.python, where.work) == ("mine", "t", "p",
                                                                        tmp_path)
        assert (label, slug, extra) == (f"{shas[0][:7]} c0", shas[0][:12], ())


@pytest.mark.parametrize(("verdicts", "code", "last"), [
    ([B, B, B, B, B], Exit.FAILED, "the ends do not hold (GOOD must pass, BAD must fail): "
     "{0} c0 bad"),
    ([G, G, G, G, G], Exit.FAILED, "the ends do not hold (GOOD must pass, BAD must fail): "
     "{0} c0 good; {4} c4 good"),
    ([U, B, B, B, B], Exit.INFRA, "the ends do not hold (GOOD must pass, BAD must fail): "
     "{0} c0 unrun; an end that could not be judged decides nothing"),
    ([G, U, U, B, B], Exit.INFRA, "only unjudged commits are left between the last good and "
     "the first bad one: the first bad commit could be any of: {1} c1 (not judged); {2} c2 "
     "(not judged); {3} c3 (bad)"),
])
def test_commits_whose_ends_do_not_hold_or_only_unjudged_are_left_say_which(
        verdicts: list[Verdict], code: int, last: str, checkout: tuple[Path, list[str]],
        answered: Callable[..., Answered], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo, shas = checkout
    answered({sha[:7]: v for sha, v in zip(shas, verdicts, strict=True)})
    assert walks.bisect_commits("mine", "t", repo, shas[0], shas[1:], python="p",
                                work=tmp_path) == code
    short = [sha[:7] for sha in shas]
    assert capsys.readouterr().out.splitlines()[-1] == "harness: bisect: " + last.format(*short)


def test_commits_on_speed_say_their_rule(checkout: tuple[Path, list[str]],
                                         answered: Callable[..., Answered], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    repo, shas = checkout
    answered({shas[0][:7]: G, shas[4][:7]: G}, {shas[0][:7]: 1.0, shas[4][:7]: 1.2})
    assert walks.bisect_commits("mine", "t", repo, shas[0], shas[1:], python="p",
                                work=tmp_path, slower=2.0) == Exit.FAILED
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(f"on speed (bad at 2x the GOOD end's ratio or slower) "
                           f"(steps: {tmp_path})")
    assert out[-1].startswith("harness: bisect: the ends do not hold (GOOD must pass with a "
                              "speed, BAD be 2x its ratio or slower): ")


# -- the work folder ---------------------------------------------------------------------

def test_a_walk_runs_in_a_new_work_folder_it_keeps(tmp_path: Path) -> None:
    seen: list[Path] = []
    assert walks.walk_in(tmp_path / "r", tmp_path, lambda work: seen.append(work) or 7) == 7
    assert seen[0].parent == tmp_path / "r" / "bisect" and seen[0].is_dir()
    assert walks.walk_in(None, tmp_path, lambda work: seen.append(work) or 0) == 0
    assert seen[1].parent == tmp_path / "reports" / "bisect"


def test_a_walk_refused_on_speed_leaves_nothing_it_made(tmp_path: Path) -> None:
    def refused(work: Path) -> int:
        (work / "step.log").write_text("a step ran\n")
        raise NoSpeed("no speed")

    reports = tmp_path / "new" / "reports"
    with pytest.raises(NoSpeed):
        walks.walk_in(reports, tmp_path, refused)
    assert not (tmp_path / "new").exists()  # every folder made for it, innermost first
    kept = tmp_path / "kept"
    (kept / "bisect" / "other").mkdir(parents=True)  # another bisect's work folder
    with pytest.raises(NoSpeed):
        walks.walk_in(kept, tmp_path, refused)
    assert [p.name for p in (kept / "bisect").iterdir()] == ["other"]


def test_each_step_is_said_as_it_ends_through_a_pipe(checkout: tuple[Path, list[str]],
                                                     tmp_path: Path) -> None:
    """A CI log (a pipe, block-buffered) shows each step's line when the step ends, not all
    of them when the bisect does: ``harness bisect`` as a user runs it."""
    repo, shas = checkout
    # PYTHONUNBUFFERED left out (set on some agents): harness flushes each line itself
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STEP_", "PYTEST_")) and k != "PYTHONUNBUFFERED"}
    argv = [sys.executable, "-m", "harness", "bisect", "--matrix", "mine", "--test",
            "checks/test_a.py::test_engine", "--commits", f"{shas[0]}..{shas[4]}",
            "--python", "current", "--reports", str(tmp_path / "r")]
    seen: list[tuple[float, str]] = []
    with subprocess.Popen(argv, cwd=repo, env=env, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append((time.monotonic(), line))
    assert proc.returncode == Exit.OK, "".join(line for _, line in seen)
    steps = [at for at, line in seen if re.match(r"harness: bisect: (good|bad) ", line)]
    assert len(steps) == 4
    assert steps[-1] - steps[0] > 1.0  # three more real steps ran after the first was said
