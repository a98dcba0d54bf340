"""harness bisect for real: a scratch git repository of this project with one commit that
breaks a kernel, found by --commits; and the lines bad input gets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from scratch_repo import bisect, commit, copy_project, git

ROOT = Path(__file__).resolve().parents[2]
TEST = ("suites/kernel_parity/test_parity.py::"
        "test_parity[silu_and_mul-strided-2d-one-tile-aligned-float16-torch-cpu]")
KERNEL = "refengine/providers/torch_provider.py"
GOOD_LINE = "    return F.silu(x[..., :d]) * x[..., d:]\n"
BAD_LINE = "    return F.silu(x[..., :d]) * x[..., d:] * 1.01\n"




@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """This project in a new repository: a good commit, two harmless ones, the one that
    breaks silu_and_mul in the torch provider, and one more harmless."""
    repo = tmp_path_factory.mktemp("engine") / "engine"
    copy_project(repo)
    shas = [commit(repo, "good")]
    kernel = repo / KERNEL
    assert GOOD_LINE in kernel.read_text()
    for n, (old, new) in enumerate([(None, None), (None, None), (GOOD_LINE, BAD_LINE),
                                    (None, None)]):
        if old is None:
            (repo / "NOTES").write_text(f"note {n}\n")
        else:
            kernel.write_text(kernel.read_text().replace(old, new))
        shas.append(commit(repo, f"step {n}" if old is None else "silu_and_mul: scale"))
    return repo, shas


def _bisect(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return bisect(tmp_path / "r", TEST, *args)


def test_commits_finds_the_commit_that_broke_the_kernel(
        scratch: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, shas = scratch
    done = _bisect(tmp_path, "--commits", f"{shas[0]}..{shas[-1]}", "--repo", str(repo))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("harness: bisect:")]
    assert lines[-1] == (f"harness: bisect: first bad commit: {shas[3][:7]} "
                         "silu_and_mul: scale"), done.stdout
    judged = {line.split()[3]: line.split()[2] for line in lines[:-1]}
    assert judged[shas[0][:7]] == "good" and judged[shas[-1][:7]] == "bad"
    assert len(judged) <= 4  # ends plus a halving, not every commit
    assert git(repo, "worktree", "list").count("\n") == 1  # the probe trees are gone


def test_a_dirty_tree_is_refused_with_nothing_written(
        scratch: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, shas = scratch
    kernel = repo / KERNEL
    before = kernel.read_text()
    kernel.write_text(before + "\n")
    try:
        done = _bisect(tmp_path, "--commits", f"{shas[0]}..{shas[-1]}", "--repo", str(repo))
    finally:
        kernel.write_text(before)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "uncommitted changes" in done.stderr
    assert not (tmp_path / "r").exists()


def test_a_test_in_no_suite_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "bisect", "--matrix", "cpu", "--test",
         "nowhere/test_x.py::test_y", "--pins", "torch==2.13.0,2.14.1", "--reports",
         str(tmp_path / "r")], cwd=ROOT, capture_output=True, text=True, timeout=300,
        check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "nowhere/test_x.py is not in this checkout" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_pin_pip_cannot_install_is_an_unrun_step_and_exit_3(tmp_path: Path) -> None:
    """No index and no wheel folder: pip installs nothing, at once and offline. Each step is
    unrun with harness run's own line, never counted good or bad; the bisect exits 3."""
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "",
           "HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "harness", "bisect", "--matrix", "cpu", "--test",
         "suites/platform/test_host.py::test_machine_matches_arch", "--pins",
         "torch==0.0.1,0.0.2", "--reports", str(tmp_path / "r")], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 3, done.stdout + done.stderr
    steps = [line for line in done.stdout.splitlines() if line.startswith("harness: bisect: ")]
    assert [s.split()[2:4] for s in steps[:2]] == [["unrun", "torch==0.0.1:"],
                                                   ["unrun", "torch==0.0.2:"]], done.stdout
    assert all("could not run (exit 3): --pin torch==0.0." in s for s in steps[:2]), steps
    assert steps[-1] == ("harness: bisect: no change: no release could be judged; not judged: "
                         "torch==0.0.1, torch==0.0.2")
