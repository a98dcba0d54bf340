"""harness bisect where steps cannot be judged, for real, on a tiny scratch project (a
``[tool.harness]`` pyproject, one matrix, one test folder) rather than this checkout:

- ``--commits`` on a scratch git repository whose ``engine.py`` says, commit by commit,
  whether its one test passes, fails, skips, or fails and then has its run killed (exit 3
  after the run folder is written, as an out-of-memory kill does): the culprit right after
  GOOD behind skipped midpoints, and a gap of unjudged commits, named, exit 3;
- ``--pins`` over a made-up engine's releases, tiny wheels built here into a folder pip
  finds (``PIP_FIND_LINKS``), one release missing: exit 3 with the unjudged pin named,
  whether the change lies across it, lies elsewhere, or there is none.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from scratch_repo import git, wheel

TEST = "checks/test_engine.py::test_engine"
PACKAGE = "harness-bisect-fixture-engine"
MODULE = PACKAGE.replace("-", "_")
STEP = re.compile(r"^harness: bisect: (?P<verdict>good|bad|unrun) +(?P<label>.+?): ")
SUITE_MATRIX = """extends: cpu
description: a scratch engine's one test
python: {{requirements: {requirements}}}
caches: {{root: "{cache}"}}
suites:
  mine: {{path: checks, workers: 1, timeout_s: 600}}
"""
COMMIT_TEST = """import pytest

import engine


def test_engine():
    if engine.STATE == "skip":
        pytest.skip("nothing to test at this commit")
    assert engine.STATE == "good"
"""
# A run that stops for a reason outside the code under test after its test failed (an
# out-of-memory kill, SIGKILL): harness run exits 3 with the failure in its run folder.
COMMIT_CONFTEST = """import os
import signal

import engine


def pytest_sessionfinish(session):
    if engine.STATE == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
"""


def _project(top: Path, *, requirements: str, cache: Path, files: dict[str, str]) -> Path:
    top.mkdir(parents=True)
    (top / "pyproject.toml").write_text("[tool.harness]\n")
    (top / "matrices").mkdir()
    (top / "matrices" / "mine.yaml").write_text(
        SUITE_MATRIX.format(requirements=requirements, cache=cache))
    (top / "checks").mkdir()
    for name, text in files.items():
        (top / "checks" / name).write_text(text)
    return top


def _bisect(cwd: Path, *args: str, env: dict[str, str] | None = None
            ) -> tuple[int, list[str], str]:
    """Exit code, the bisect's own lines, and the whole output (for a failing assert)."""
    done = subprocess.run(
        [sys.executable, "-m", "harness", "--root", str(cwd), "bisect", "--matrix", "mine",
         "--test", TEST,
         "--reports", str(cwd / "r"), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("harness: bisect:")]
    return done.returncode, lines, done.stdout[-4000:] + done.stderr[-2000:]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's harness cache: the environments its matrices build, shared by its tests."""
    return tmp_path_factory.mktemp("cache")


# -- --commits ----------------------------------------------------------------------------


def _history(top: Path, states: list[str], cache: Path) -> list[str]:
    """A scratch repository, one commit per state of ``engine.py``; the commits' labels
    as bisect prints them (short sha and subject). Its matrix pins nothing: each step
    runs in the environment of the harness's own runtime packages (no torch to import),
    under ``cache``, built by the first step."""
    repo = _project(top, requirements="[]", cache=cache,
                    files={"test_engine.py": COMMIT_TEST, "conftest.py": COMMIT_CONFTEST})
    git(repo, "init", "-q")
    labels = []
    for n, state in enumerate(states):
        (repo / "engine.py").write_text(f"STATE = {state!r}  # as of commit {n}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"c{n} {state}")
        labels.append(git(repo, "log", "-1", "--format=%h %s").strip())
    return labels


def _commits(repo: Path, labels: list[str]) -> tuple[int, list[str], str]:
    span = f"{labels[0].split()[0]}..{labels[-1].split()[0]}"
    return _bisect(repo, "--commits", span, "--repo", str(repo))


def _judged(lines: list[str]) -> dict[str, str]:
    """The step lines (``harness: bisect: good  1a2b3c4 c0 good: passed``) by label."""
    steps = [STEP.match(line) for line in lines]
    return {found["label"]: found["verdict"] for found in steps if found}


def test_the_culprit_right_after_good_behind_skipped_commits(tmp_path: Path,
                                                              cache: Path) -> None:
    """The first commit of the range broke the test; the next two skip it. The halving
    lands on a skipped commit and must look below it, not only above."""
    labels = _history(tmp_path / "engine", ["good", "bad", "skip", "skip", "bad"], cache)
    code, lines, out = _commits(tmp_path / "engine", labels)
    assert code == 0, out
    assert lines[-1] == f"harness: bisect: first bad commit: {labels[1]}", out
    judged = _judged(lines)
    assert judged[labels[0]] == "good" and judged[labels[1]] == "bad", out
    assert "unrun" in {judged.get(labels[2]), judged.get(labels[3])}, out


def test_only_unjudged_commits_left_are_named_and_exit_3(tmp_path: Path, cache: Path) -> None:
    """After GOOD: a commit whose test skips, then one whose test fails and whose run is
    then killed (exit 3, a run folder written with the failure): neither is judged, so
    the first bad commit is any of them or BAD, as git bisect says of skipped commits."""
    labels = _history(tmp_path / "engine", ["good", "skip", "killed", "bad"], cache)
    code, lines, out = _commits(tmp_path / "engine", labels)
    assert code == 3, out
    assert lines[-1] == (
        "harness: bisect: only unjudged commits are left between the last good and the "
        f"first bad one: the first bad commit could be any of: {labels[1]} (not judged); "
        f"{labels[2]} (not judged); {labels[3]} (bad)"), out
    judged = _judged(lines)
    assert judged == {labels[0]: "good", labels[3]: "bad", labels[1]: "unrun",
                      labels[2]: "unrun"}, out
    killed = next(line for line in lines if labels[2] in line)
    assert ": could not run (exit 3): " in killed, killed
    # The killed step's run folder holds its test, failed: still never a bad verdict.
    (partial,) = (tmp_path / "engine" / "r").glob(
        f"bisect/*/{labels[2].split()[0]}*/mine/*/junit/mine.partial.jsonl")
    cases = [json.loads(line) for line in partial.read_text().splitlines()]
    assert {c["nodeid"]: c["outcome"] for c in cases}[TEST] == "failed", cases
    assert git(tmp_path / "engine", "worktree", "list").count("\n") == 1


# -- --pins -------------------------------------------------------------------------------


# What each release adds to add() and mul(): mul breaks in 1.1, add in 1.2, which has no
# wheel here (1.3 is the first add() found broken).
RELEASES = {"1.0": (0, 0), "1.1": (0, 1), "1.3": (1, 1)}
PIN_TEST = f"""import {MODULE} as engine


def test_engine():
    assert engine.{{op}}(2, 3) == {{expected}}
"""


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory,
             cache: Path) -> tuple[Path, dict[str, str]]:
    """Wheels of 1.0, 1.1 and 1.3 (1.2 missing, as a release without a wheel for this
    platform), the scratch project, and an environment that finds the wheels (the pins'
    environments are built once, under the module's cache, and shared by its tests)."""
    top = tmp_path_factory.mktemp("releases")
    wheels = top / "wheels"
    wheels.mkdir()
    for version, (add_off, mul_off) in RELEASES.items():
        wheel(wheels, PACKAGE, version, f"def add(a, b):\n    return a + b + {add_off}\n\n\n"
                                f"def mul(a, b):\n    return a * b + {mul_off}\n")
    _project(top / "project", requirements=f'["{PACKAGE}==1.0"]', cache=cache,
             files={})
    env = dict(os.environ, PIP_FIND_LINKS=" ".join(
        filter(None, [str(wheels), os.environ.get("PIP_FIND_LINKS")])))
    return top / "project", env


def _pins(releases: tuple[Path, dict[str, str]], op: str, expected: int
          ) -> tuple[int, list[str], str]:
    project, env = releases
    (project / "checks" / "test_engine.py").write_text(PIN_TEST.format(op=op,
                                                                       expected=expected))
    return _bisect(project, "--pins", f"{PACKAGE}==1.0,1.1,1.2,1.3", env=env)


def _pin(version: str) -> str:
    return f"{PACKAGE}=={version}"


def test_a_change_across_a_pin_not_installed_names_both(
        releases: tuple[Path, dict[str, str]]) -> None:
    """add() broke in 1.2, the pin pip cannot install: the first bad release is 1.2 or 1.3,
    never 1.3 alone."""
    code, lines, out = _pins(releases, "add", 5)
    assert code == 3, out
    assert [line.split()[2] for line in lines[:-1]] == ["good", "good", "unrun", "bad"], out
    assert f"unrun {_pin('1.2')}: could not run (exit 3): --pin {_pin('1.2')}" in lines[2]
    assert lines[-1] == (
        "harness: bisect: the change lies across releases that could not be judged: the "
        f"first bad release could be any of: {_pin('1.2')} (not judged); {_pin('1.3')} "
        f"(bad), after {_pin('1.1')} (good)"), out


def test_a_change_beside_a_pin_not_installed_still_names_it(
        releases: tuple[Path, dict[str, str]]) -> None:
    """mul() broke in 1.1: found, and the gap at 1.2 named all the same (exit 3)."""
    code, lines, out = _pins(releases, "mul", 6)
    assert code == 3, out
    assert lines[-1] == (
        f"harness: bisect: first bad release: {_pin('1.1')} (after {_pin('1.0')}, good); "
        f"not judged: {_pin('1.2')} (the change does not lie there)"), out


def test_no_change_with_a_pin_not_installed_names_it(
        releases: tuple[Path, dict[str, str]]) -> None:
    """A test that fails at every release judged: no change, the gap at 1.2 named."""
    code, lines, out = _pins(releases, "add", 4)
    assert code == 3, out
    assert lines[-1] == (f"harness: bisect: no change: every release judged is bad; "
                         f"not judged: {_pin('1.2')}"), out
