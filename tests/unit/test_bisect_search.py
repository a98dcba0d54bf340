"""``harness bisect --commits``'s search and verdict at each side (harness/bisect/commits.py
``search``, ``commits_between``; harness/bisect/run.py ``_conclude``, ``work_folder``):
a real git checkout of a few commits, each commit judged by a probe that says what a
``harness run --test`` step would (tests/integration/test_bisect*.py run the real steps)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scratch_repo import git

from harness.bisect.commits import commits_between, search
from harness.bisect.run import _conclude, work_folder
from harness.bisect.verdict import Step, Verdict
from harness.errors import Exit, UsageError

G, B, U = Verdict.GOOD, Verdict.BAD, Verdict.UNRUN


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A checkout of 7 commits, c0 to c6, their shas oldest first."""
    path = tmp_path_factory.mktemp("repo")
    git(path, "init", "-q")
    for i in range(7):
        (path / "f.txt").write_text(f"{i}\n")
        git(path, "add", "f.txt")
        git(path, "commit", "-qm", f"c{i}")
    return path, git(path, "rev-list", "--reverse", "HEAD").split()


def _search(repo: tuple[Path, list[str]], verdicts: list[Verdict], tmp_path: Path
            ) -> tuple[list[str], list[int]]:
    """search from c0 (GOOD) to c6 with commit i judged verdicts[i]: (the suspects as
    commit numbers, the commits probed in order)."""
    path, shas = repo
    probed: list[int] = []

    def probe(sha: str, tree: Path) -> Step:
        i = shas.index(sha)
        assert (tree / "f.txt").read_text() == f"{i}\n"  # the commit's own tree
        probed.append(i)
        return Step(label=sha[:7], verdict=verdicts[i], status="")

    found = search(path, shas[0], shas[1:], tmp_path, probe, lambda step: None)
    return [f"c{shas.index(s)}" for s in found.suspects], probed


def test_the_first_bad_commit_is_found_by_halving(repo: tuple[Path, list[str]],
                                                  tmp_path: Path) -> None:
    assert _search(repo, [G, G, G, B, B, B, B], tmp_path) == (["c3"], [0, 6, 3, 1, 2])
    assert _search(repo, [G, B, B, B, B, B, B], tmp_path)[0] == ["c1"]
    assert _search(repo, [G, G, G, G, G, G, B], tmp_path) == (["c6"], [0, 6, 3, 4, 5])


def test_ends_that_do_not_hold_name_no_suspect(repo: tuple[Path, list[str]],
                                               tmp_path: Path) -> None:
    assert _search(repo, [B, B, B, B, B, B, B], tmp_path) == ([], [0])
    assert _search(repo, [G, G, G, G, G, G, G], tmp_path) == ([], [0, 6])
    assert _search(repo, [U, B, B, B, B, B, B], tmp_path) == ([], [0])


def test_unjudged_commits_between_the_last_good_and_first_bad_are_suspects(
        repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    suspects, probed = _search(repo, [G, G, U, U, B, B, B], tmp_path)
    assert suspects == ["c2", "c3", "c4"] and probed[:2] == [0, 6]


def test_a_range_is_good_dot_dot_bad_of_this_checkout(repo: tuple[Path, list[str]],
                                                      tmp_path: Path) -> None:
    path, shas = repo
    good, between = commits_between(path, f"{shas[0]}..{shas[3]}")
    assert good == shas[0] and between == shas[1:4]
    for span in ("HEAD", f"{shas[0]}..", f"..{shas[3]}"):
        with pytest.raises(UsageError, match=f"--commits {span}: expected GOOD..BAD"):
            commits_between(path, span)
    with pytest.raises(UsageError, match="does not descend from"):
        commits_between(path, f"{shas[3]}..{shas[0]}")
    with pytest.raises(UsageError, match="not a git checkout"):
        commits_between(tmp_path, f"{shas[0]}..{shas[3]}")


def test_a_dirty_tree_names_its_first_change(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("1\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "one")
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("2\n")
    with pytest.raises(UsageError, match=r"uncommitted changes \(M a.txt, \.\.\.\)"):
        commits_between(tmp_path, "HEAD..HEAD")


def _step(label: str, verdict: Verdict, infra: bool = False) -> Step:
    return Step(label=label, verdict=verdict, status="s", infra=infra)


def test_the_verdict_names_the_change_and_what_was_not_judged(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _conclude([_step("p1", G), _step("p2", B)], unit="pin") == Exit.OK
    assert capsys.readouterr().out == "harness: bisect: first bad pin: p2 (after p1, good)\n"
    assert _conclude([_step("p1", B), _step("p2", U), _step("p3", G)], unit="pin") == Exit.INFRA
    assert capsys.readouterr().out == (
        "harness: bisect: the change lies across pins that could not be judged: the first "
        "good pin could be any of: p2 (not judged); p3 (good), after p1 (bad)\n")
    assert _conclude([_step("p0", U), _step("p1", G), _step("p2", B)], unit="pin") == Exit.OK
    assert capsys.readouterr().out == ("harness: bisect: first bad pin: p2 (after p1, good); "
                                       "not judged: p0 (the change does not lie there)\n")
    assert _conclude([_step("p1", G), _step("p2", B, infra=True)], unit="pin") == Exit.INFRA
    capsys.readouterr()


def test_no_change_is_failed_and_none_judged_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    assert _conclude([_step("p1", G), _step("p2", G), _step("p3", U)], unit="pin") == Exit.FAILED
    assert capsys.readouterr().out == ("harness: bisect: no change: every pin judged is good; "
                                       "not judged: p3\n")
    assert _conclude([_step("p1", U, infra=True)], unit="commit") == Exit.INFRA
    assert capsys.readouterr().out == "harness: bisect: no change: no commit could be judged; " \
                                      "not judged: p1\n"
    assert _conclude([_step("p1", G), _step("p2", B), _step("p3", G)], unit="pin") == Exit.OK
    assert "first bad pin: p2" in capsys.readouterr().out


def test_the_work_folder_is_made_under_reports_and_may_exist(tmp_path: Path) -> None:
    first = work_folder(None, tmp_path)
    assert first.is_dir() and first.parent == tmp_path / "reports" / "bisect"
    assert work_folder(None, tmp_path).is_dir()  # the same second, the same process
    deep = tmp_path / "deep" / "er"
    assert work_folder(deep, tmp_path).parent == deep / "bisect"


def test_a_commit_is_labelled_by_its_short_sha_and_subject_cut_at_60(tmp_path: Path) -> None:
    from harness.bisect.commits import label

    git(tmp_path, "init", "-q")
    subject = "a subject longer than a line of the bisect has room for: " + "x" * 30
    (tmp_path / "f.txt").write_text("1\n")
    git(tmp_path, "add", "f.txt")
    git(tmp_path, "commit", "-qm", subject + "\n\nthe body, never shown")
    sha = git(tmp_path, "rev-parse", "HEAD").strip()
    short = git(tmp_path, "log", "-1", "--format=%h", sha).strip()
    assert label(tmp_path, sha) == f"{short} {subject}"[:60]
    assert len(label(tmp_path, sha)) == 60
