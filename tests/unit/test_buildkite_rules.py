"""The rules of ``harness import buildkite`` at their boundaries, and of a suite's JUnit read
when its process ends: where a bad file is wrong, which command is a runner call and whose
time limit wins, ``python -m pytest``, a step's ``command`` alone, groups among other
steps, ``--only`` and the line naming its cut, files of one name under ``--per-file``,
what a step leaves out (parallelism, soft_fail, device); and the test that held the most
memory. Hand-written step files under ``tmp_path``, imported with ``import_steps`` as the
command does; JUnit files as pytest writes them with their sidecar as the plugin does."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.importers.buildkite import Imported, ImportedSuite, import_steps, per_file
from harness.results.layout import partial_for
from harness.results.sidecar import PEAK_RSS_PROPERTY, result_line
from harness.results.suite_junit import read_suite


def _file(tmp_path: Path, text: str) -> Path:
    file = tmp_path / "cpu.yaml"
    file.write_text(text)
    return file


def _steps(tmp_path: Path, text: str, only: tuple[str, ...] = (), *,
           split: bool = False) -> Imported:
    """``text`` (the lines under ``steps:``) written as a step file and imported."""
    return import_steps(_file(tmp_path, "steps:\n" + text), (), only, split=split)


def _runner_step(key: str, line: str, extra: str = "", limit: str = "10m") -> str:
    """One step whose command runs ``line`` inside a runner script's quotes."""
    return (f"- label: {key}\n  key: {key}\n{extra}  commands:\n"
            f"  - 'bash run.sh {limit} \"{line}\"'\n")


def _one(imported: Imported) -> ImportedSuite:
    (suite,) = imported.suites
    return suite


# -- a file that is no step file -----------------------------------------------------------

def test_not_yaml_names_the_line_it_broke_on(tmp_path: Path) -> None:
    file = _file(tmp_path, "steps:\n- label: a\n- key: [b\n- label: c\n  x: : :\n")
    with pytest.raises(UsageError) as raised:
        import_steps(file)
    assert str(raised.value).startswith(f"{file}:4: not YAML: ")


@pytest.mark.parametrize("text", ["env:\n  A: 1\n", "steps: 5\n", "just text\n"])
def test_a_file_without_a_list_of_steps_is_refused(tmp_path: Path, text: str) -> None:
    file = _file(tmp_path, text)
    with pytest.raises(UsageError, match="steps: a Buildkite step file has a list of steps"):
        import_steps(file)


def test_groups_are_walked_and_a_wait_between_steps_is_passed_over(tmp_path: Path) -> None:
    imported = _steps(tmp_path, "- group: Kernels\n  steps:\n"
                                "  - key: attn\n    command: pytest tests/attn.py\n"
                                "  - wait\n"
                                "  - key: moe\n    command: pytest tests/moe.py\n"
                                "- wait\n"
                                "- key: models\n  command: pytest tests/models\n")
    assert [(s.name, s.targets) for s in imported.suites] == [
        ("attn", ("tests/attn.py",)), ("moe", ("tests/moe.py",)),
        ("models", ("tests/models",))]
    assert imported.unmapped == ()


# -- which command is a runner call, and its time limit --------------------------------------

@pytest.mark.parametrize(("limit", "seconds"), [("30m", 1800), ("45s", 45), ("2h", 7200)])
def test_the_runner_s_time_limit_is_the_suite_s(tmp_path: Path, limit: str,
                                                seconds: int) -> None:
    suite = _one(_steps(tmp_path, _runner_step("k", "pytest tests/a.py", limit=limit)))
    assert suite.timeout_s == seconds and suite.targets == ("tests/a.py",)


def test_a_runner_without_a_time_limit_leaves_the_suite_without_one(tmp_path: Path) -> None:
    suite = _one(_steps(tmp_path, _runner_step("k", "pytest tests/a.py", limit="soon")))
    assert suite.timeout_s is None and suite.targets == ("tests/a.py",)


def test_the_step_s_timeout_in_minutes_wins_over_the_runner_s(tmp_path: Path) -> None:
    step = _runner_step("k", "pytest tests/a.py", "  timeout_in_minutes: 20\n", limit="30m")
    assert _one(_steps(tmp_path, step)).timeout_s == 1200


def test_timeout_in_minutes_alone(tmp_path: Path) -> None:
    step = "- key: k\n  timeout_in_minutes: 3\n  command: pytest tests/a.py\n"
    assert _one(_steps(tmp_path, step)).timeout_s == 180


def test_a_long_pytest_command_without_a_runner_is_read_whole(tmp_path: Path) -> None:
    step = "- key: k\n  commands:\n  - pytest -x tests/a.py tests/b.py\n"
    suite = _one(_steps(tmp_path, step))
    assert suite.targets == ("tests/a.py", "tests/b.py") and suite.options == ("-x",)
    assert suite.timeout_s is None


def test_three_words_are_no_runner_call(tmp_path: Path) -> None:
    """``bash run.sh "..."`` lacks the time limit a runner call has before its command: the
    line is its own, and no pytest command."""
    file = _file(tmp_path, "steps:\n- key: k\n  commands:\n"
                           "  - 'bash run.sh \"pytest tests/a.py\"'\n"
                           "- key: j\n  commands:\n  - pytest tests/b.py\n")
    imported = import_steps(file)
    assert [s.name for s in imported.suites] == ["j"]
    assert imported.unmapped == (
        f"{file}: step k: not a pytest command, not run: bash run.sh \"pytest tests/a.py\"",
        f"{file}: step k: commands: no pytest command (not imported)")


def test_a_runner_call_after_setup_lines_is_still_the_runner_s(tmp_path: Path) -> None:
    """vLLM's Zen steps export the image's registry (and branch on it) before the runner
    call: the call is read as one; the setup lines are said, comments are not."""
    file = _file(tmp_path, "steps:\n- key: zen\n  commands:\n  - |\n"
                           "    # the agent has no registry\n"
                           "    export REGISTRY=r.example\n"
                           "    if [[ $$B == main ]]; then export REPO=m; fi\n"
                           "    bash run-zen.sh 20m \"\n    pytest -x tests/zen.py\"\n")
    imported = import_steps(file)
    suite = _one(imported)
    assert suite.targets == ("tests/zen.py",) and suite.timeout_s == 1200
    assert suite.options == ("-x",)
    assert imported.unmapped == (
        f"{file}: step zen: not a pytest command, not run: export REGISTRY=r.example",
        f"{file}: step zen: not a pytest command, not run: if [[ $$B == main ]]; then "
        "export REPO=m; fi")


def test_setup_lines_before_a_runner_call_that_does_not_parse_are_still_said(
        tmp_path: Path) -> None:
    file = _file(tmp_path, "steps:\n- key: k\n  commands:\n  - |\n"
                           "    export A=1\n    bash run.sh 5m \"pytest tests/a.py\n")
    imported = import_steps(file)
    assert imported.suites == ()
    assert imported.unmapped[0] == f"{file}: step k: not a pytest command, not run: export A=1"
    assert imported.unmapped[1].startswith(f"{file}: step k: not read as a shell line (")


def test_a_command_without_a_runner_call_is_all_its_own_lines(tmp_path: Path) -> None:
    file = _file(tmp_path, "steps:\n- key: k\n  commands:\n  - |\n"
                           "    export A=1\n    pytest tests/a.py\n")
    imported = import_steps(file)
    assert _one(imported).targets == ("tests/a.py",) and _one(imported).timeout_s is None
    assert imported.unmapped == (f"{file}: step k: not a pytest command, not run: export A=1",)


def test_python_m_pytest_is_a_pytest_command(tmp_path: Path) -> None:
    suite = _one(_steps(tmp_path, _runner_step("k", "python -m pytest -x tests/a.py")))
    assert suite.targets == ("tests/a.py",) and suite.options == ("-x",)


def test_a_step_s_single_command(tmp_path: Path) -> None:
    step = "- key: k\n  command: bash run.sh 5m \"pytest tests/a.py\"\n"
    suite = _one(_steps(tmp_path, step))
    assert suite.targets == ("tests/a.py",) and suite.timeout_s == 300


# -- what a step says beside its commands -----------------------------------------------------

def test_parallelism_and_soft_fail_when_given_and_when_not(tmp_path: Path) -> None:
    imported = _steps(tmp_path, _runner_step("plain", "pytest tests/a.py")
                      + _runner_step("wide", "pytest tests/b.py",
                                     "  parallelism: 4\n  soft_fail: true\n")
                      + _runner_step("odd", "pytest tests/c.py", "  soft_fail: yes-ish\n"))
    assert [(s.name, s.shards, s.soft_fail) for s in imported.suites] == [
        ("plain", 1, False), ("wide", 4, True), ("odd", 1, False)]


def test_a_suite_made_by_hand_is_one_shard_and_not_soft_failing() -> None:
    suite = ImportedSuite(name="k", step="k", label="K", targets=("tests/a.py",))
    assert suite.shards == 1 and suite.soft_fail is False


@pytest.mark.parametrize(("written", "kept"), [
    ("intel_cpu", "intel_cpu"), ("''", ""), ("5", "5"), ("0", None), ("null", None)])
def test_a_step_s_device_as_its_comment_writes_it(tmp_path: Path, written: str,
                                                  kept: str | None) -> None:
    step = _runner_step("k", "pytest tests/a.py", f"  device: {written}\n")
    assert _one(_steps(tmp_path, step)).device == kept


# -- --only -------------------------------------------------------------------------------------

def test_only_keeps_a_file_a_folder_s_files_and_a_file_s_node_ids(tmp_path: Path) -> None:
    line = ("pytest tests/a.py tests/ab.py tests/models/test_m.py tests/c.py::test_one "
            "tests/cd.py")
    imported = _steps(tmp_path, _runner_step("k", line),
                      only=("tests/a.py", "tests/models/", "tests/c.py"))
    assert _one(imported).targets == ("tests/a.py", "tests/models/test_m.py",
                                      "tests/c.py::test_one")
    assert imported.unmapped == (f"{tmp_path / 'cpu.yaml'}: step k: --only leaves out "
                                 "2 of 5 targets",)


def test_only_names_the_cut_of_each_suite_it_cut_and_no_other(tmp_path: Path) -> None:
    imported = _steps(tmp_path, _runner_step("whole", "pytest tests/a.py")
                      + _runner_step("cut", "pytest tests/a.py tests/b.py tests/c.py")
                      + _runner_step("gone", "pytest tests/d.py"),
                      only=("tests/a.py",))
    assert [(s.name, s.targets) for s in imported.suites] == [
        ("whole", ("tests/a.py",)), ("cut", ("tests/a.py",))]
    file = tmp_path / "cpu.yaml"
    assert imported.unmapped == (f"{file}: step cut: --only leaves out 2 of 3 targets",
                                 f"{file}: step gone: --only leaves out 1 of 1 targets")


# -- --per-file ---------------------------------------------------------------------------------

def test_files_whose_folders_read_alike_still_get_names_of_their_own(tmp_path: Path) -> None:
    """``a-b`` and ``a_b`` make one slug: however many folders are taken, the names stay
    alike, so the folders stop at the path's whole length (the loop ends) and the second is
    told apart by its suite's name."""
    line = "pytest tests/a-b/test_x.py tests/a_b/test_x.py::test_one tests/c/test_x.py"
    imported = _steps(tmp_path, _runner_step("k", line), split=True)
    assert [(s.name, s.targets) for s in imported.suites] == [
        ("tests_a_b_test_x", ("tests/a-b/test_x.py",)),
        ("k_tests_a_b_test_x", ("tests/a_b/test_x.py::test_one",)),
        ("c_test_x", ("tests/c/test_x.py",))]


def test_node_ids_of_one_file_with_more_colons_stay_one_suite() -> None:
    suite = ImportedSuite(name="k", step="k", label="K",
                          targets=("tests/a.py::TestA::test_one", "tests/a.py::TestA::test_two",
                                   "tests/b.py"))
    assert [(s.name, s.targets) for s in per_file([suite])] == [
        ("a", ("tests/a.py::TestA::test_one", "tests/a.py::TestA::test_two")),
        ("b", ("tests/b.py",))]


# -- a suite's JUnit: the test that held the most memory --------------------------------------

def _suite_with_peaks(tmp_path: Path, peaks: list[str | None]) -> Path:
    """A JUnit file as pytest writes it (xunit2, no properties per case), one test per
    peak, and its sidecar as the plugin writes it (``peak_rss_mb`` among the properties)."""
    junit = tmp_path / "s.xml"
    names = [f"test_{i}" for i in range(len(peaks))]
    junit.write_text("<testsuites><testsuite name='pytest'>"
                     + "".join(f"<testcase classname='tests.test_m' name='{n}'/>"
                               for n in names)
                     + "</testsuite></testsuites>")
    partial_for(junit).write_text("".join(
        result_line(f"tests/test_m.py::{n}", "call", "passed", 0.1, "",
                    [] if mb is None else [(PEAK_RSS_PROPERTY, mb)])
        for n, mb in zip(names, peaks, strict=True)))
    return junit


@pytest.mark.parametrize(("peaks", "test"), [
    (["100.0", "300.5", "200.0"], 1),  # rises, then falls
    (["300.0", "100.0"], 0),  # the first is the highest
    (["100.0", "300.0", "300.0"], 1),  # a tie: the first to reach it
    ([None, "50.0", "not a number", None], 1),  # tests without a reading
])
def test_the_peak_is_the_highest_reading_and_the_first_test_to_reach_it(
        tmp_path: Path, peaks: list[str | None], test: int) -> None:
    read = read_suite(_suite_with_peaks(tmp_path, peaks), "s")
    best = max(float(p) for p in peaks if p is not None and p[0].isdigit())
    assert read.peak == (best, f"tests/test_m.py::test_{test}")
    assert read.counts == {"passed": len(peaks)}


def test_a_suite_without_readings_has_no_peak(tmp_path: Path) -> None:
    assert read_suite(_suite_with_peaks(tmp_path, [None, None]), "s").peak is None
