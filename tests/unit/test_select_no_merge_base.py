"""``--changed-since REF`` where REF and HEAD have no merge base refuses in one line (exit 2),
never falls back to diffing against REF itself: a shallow clone (the history stops before
the branch left REF) and unrelated histories, in real git repositories, through every
command that selects by a change (``harness select``, ``harness run``, ``harness ci
pipeline``, ``harness ci select``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from scratch_repo import commit, git

from harness.cli import main


def _commit(repo: Path, name: str) -> None:
    (repo / f"{name}.txt").write_text(f"{name}\n")
    commit(repo, name)


def _repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    _commit(path, "a")
    return path


@pytest.fixture
def unrelated(tmp_path: Path) -> tuple[Path, str]:
    """HEAD on main; ``other`` a history of its own."""
    repo = _repo(tmp_path / "repo")
    git(repo, "checkout", "-q", "--orphan", "other")
    git(repo, "rm", "-rfq", ".")
    _commit(repo, "b")
    git(repo, "checkout", "-q", "main")
    return repo, "other"


@pytest.fixture
def shallow(tmp_path: Path) -> tuple[Path, str]:
    """A depth-1 clone of a branch that left main one commit before main's tip, main fetched
    at depth 1 as a CI job fetches a pull request's target (FETCH_HEAD)."""
    origin = _repo(tmp_path / "origin")
    _commit(origin, "b")
    git(origin, "checkout", "-q", "-b", "feature")
    _commit(origin, "c")
    git(origin, "checkout", "-q", "main")
    _commit(origin, "d")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "feature",
                    f"file://{origin}", str(clone)], check=True, capture_output=True)
    git(clone, "fetch", "-q", "--depth", "1", "origin", "main")
    assert git(clone, "rev-parse", "--is-shallow-repository").strip() == "true"
    return clone, "FETCH_HEAD"


COMMANDS = {
    "select": ["select", "--changed-since"],
    "run": ["run", "--matrix", "cpu", "--dry-run", "--changed-since"],
    "ci-pipeline": ["ci", "pipeline", "--provider", "buildkite", "--changed-since"],
    "ci-select": ["ci", "select", "--changed-since"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(("history", "said"), [
    ("unrelated", "{ref} and HEAD share no history in {root} (unrelated histories): "
                  "there is no change to select by"),
    ("shallow", "no merge base with HEAD in this shallow clone ({root}): fetch the history "
                "back to it (git fetch --unshallow; actions/checkout: fetch-depth: 0)"),
], ids=["unrelated", "shallow"])
def test_no_merge_base_is_refused_in_one_line(request: pytest.FixtureRequest,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch,
                                              history: str, said: str, command: str) -> None:
    root, ref = request.getfixturevalue(history)
    monkeypatch.setenv("HARNESS_ROOT", str(root))
    assert main([*COMMANDS[command], ref]) == 2
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [
        f"harness: error: --changed-since {ref}: " + said.format(ref=ref, root=root.resolve())]
    assert "selected" not in out and "steps:" not in out and "matrix=" not in out
