"""Where a suite runs is decided once (harness/matrix/suite_paths.py ``suite_place``): the
ids ``harness select --collect`` names are the ids a run of the lane records, for a suite
with its own rootdir, one outside the project, and a shipped suite in a user's project
(each of which collected with the project as rootdir named other ids than the run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scratch_repo import git

from harness.results.run_folder import read_run

TESTS = '''import pytest


@pytest.mark.parametrize("n", [1, 2])
def test_{name}(n):
    assert n
'''


def _harness(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_ROOT", "PYTHONPATH")}
    return subprocess.run([sys.executable, "-m", "harness", "--root", str(project), *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=900,
                          check=False)


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "matrices").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.harness]\n")
    inner = project / "checks" / "inner"
    inner.mkdir(parents=True)
    (inner / "test_own.py").write_text(TESTS.format(name="own_rootdir"))
    outside = tmp_path / "elsewhere" / "tests"
    outside.mkdir(parents=True)
    (outside / "test_away.py").write_text(TESTS.format(name="outside"))
    suite = "workers: 1, timeout_s: 600, markers: '', k: '', tier: full, enabled: true"
    (project / "matrices" / "mine.yaml").write_text(
        "extends: cpu.yaml\nname: mine\ndescription: a project's suites in three places\n"
        "suites:\n"
        f"  own: {{path: checks/inner, rootdir: checks, {suite}}}\n"
        f"  away: {{path: {outside}, {suite}}}\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "project")
    (project / "NOTES.txt").write_text("a file of no known role: every lane is selected\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "notes")
    return project


def test_select_collects_the_ids_a_run_records_wherever_a_suite_lives(tmp_path: Path) -> None:
    project = _project(tmp_path)
    suites = ("own", "away", "platform")  # platform: the cpu matrix's shipped suite
    ran = _harness(project, "run", "--matrix", "mine", "--python", "current",
                   *[arg for s in suites for arg in ("--suite", s)])
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    [run_dir] = (project / "reports" / "mine").iterdir()
    run = read_run(run_dir, lambda line: None)
    recorded = {(c.suite, c.nodeid) for c in run.cases.values()}
    by_suite = {s: {n for suite, n in recorded if suite == s} for s in suites}
    assert by_suite["own"] == {"inner/test_own.py::test_own_rootdir[1]",
                               "inner/test_own.py::test_own_rootdir[2]"}
    assert by_suite["away"] == {"test_away.py::test_outside[1]",
                                "test_away.py::test_outside[2]"}
    assert by_suite["platform"] and all(n.startswith("suites/platform/")
                                        for n in by_suite["platform"])

    chosen = _harness(project, "select", "--changed-since", "HEAD~1", "--matrices", "mine",
                      "--collect")
    assert chosen.returncode == 0, chosen.stdout + chosen.stderr
    lines = chosen.stdout.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("lane mine: ")))
    collected = {line.strip() for line in lines[head + 1:] if line.startswith("  ")
                 and "::" in line}
    ran_ids = {n for _suite, n in recorded}
    assert collected >= ran_ids, sorted(ran_ids - collected)
