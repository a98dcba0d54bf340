"""`harness ci check-clean` against real temporary git repositories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from scratch_repo import git

from harness.cli import main


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "run.sh").write_text("echo hi\n")
    (path / ".gitignore").write_text("reports/\n")
    git(path, "add", "run.sh", ".gitignore")
    git(path, "commit", "-q", "-m", "start")
    return path


def _check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["ci", "check-clean", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_clean_checkout_exits_0(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "reports").mkdir()
    (repo / "reports" / "x.xml").write_text("<x/>")  # ignored: not dirt
    code, out, _ = _check(repo, capsys)
    assert (code, out) == (0, f"{repo}: clean\n")


def test_modified_file_exits_1_and_is_named(repo: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "run.sh").write_text("echo changed\n")
    code, out, err = _check(repo, capsys)
    assert code == 1
    assert out == " M run.sh\n"
    assert err == f"harness: {repo}: checkout is dirty (1 paths)\n"


def test_staged_file_is_dirty(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "new.py").write_text("x = 1\n")
    git(repo, "add", "new.py")
    code, out, _ = _check(repo, capsys)
    assert (code, out) == (1, "A  new.py\n")


def test_untracked_file_is_dirty_even_in_a_new_folder(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "deep" / "er").mkdir(parents=True)
    (repo / "deep" / "er" / "stray.txt").write_text("?")
    code, out, _ = _check(repo, capsys)
    assert (code, out) == (1, "?? deep/er/stray.txt\n")


@pytest.mark.skipif(os.name != "posix", reason="needs the executable bit")
def test_mode_only_change_counts_as_clean(repo: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "run.sh").chmod(0o755)
    # Plain git (fileMode on) sees the change; check-clean must not.
    plain = subprocess.run(["git", "-C", str(repo), "-c", "core.fileMode=true", "status",
                            "--porcelain"], capture_output=True, text=True, check=True)
    assert plain.stdout == " M run.sh\n"
    code, _, _ = _check(repo, capsys)
    assert code == 0


def test_broken_repository_exits_3(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = repo.parent / "broken"
    broken.mkdir()
    (broken / ".git").write_text("gitdir: /nonexistent/elsewhere/.git\n")
    code, out, err = _check(broken, capsys)
    assert code == 3
    assert out == ""
    assert err.startswith(f"harness: error: {broken}: git status failed: ")
    assert err.count("\n") == 1


def test_not_a_repository_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    # Stop git from finding a repository above tmp_path.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    code, _, err = _check(plain, capsys)
    assert code == 3
    assert "not a git repository" in err


def test_missing_git_exits_3(repo: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(repo / "no-bin-here"))
    code, _, err = _check(repo, capsys)
    assert code == 3
    assert err == "harness: error: git not found on PATH; cannot tell whether the checkout " \
                  "is clean\n"


def test_missing_directory_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _check(tmp_path / "gone", capsys)
    assert code == 3
    assert err == f"harness: error: {tmp_path / 'gone'}: not a directory\n"
