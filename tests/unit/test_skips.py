"""harness.results.skips: how much of a suite skipped and why (a suite that runs but
tests nothing is a state, not a pass)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from harness.results.outcome import SkipReason
from harness.results.skips import TOP_REASONS, SkipSummary
from harness.results.suite_junit import read_suite


def _junit(tmp_path: Path, cases: list[str]) -> Path:
    path = tmp_path / "s.xml"
    path.write_text("<testsuites><testsuite name='s'>" + "".join(cases)
                    + "</testsuite></testsuites>")
    return path


_NAMES = itertools.count()


def _case(child: str = "", classname: str = "t") -> str:
    # a name of its own: one <testcase> per attempt of a test is how reruns are written
    return f"<testcase classname='{classname}' name='x{next(_NAMES)}'>{child}</testcase>"


def test_skips_counted_with_reasons_xfails_and_the_runner_s_case_left_out(
        tmp_path: Path) -> None:
    junit = _junit(tmp_path, [
        _case(), _case("<failure message='boom'/>"),
        _case("<skipped message='needs fp8'/>"), _case("<skipped message='needs fp8'/>"),
        _case("<skipped>needs a GPU\nsecond line</skipped>"), _case("<skipped/>"),
        _case("<skipped type='pytest.xfail' message='known'/>"),
        _case("<error message='crashed'/>", classname="harness.s"),  # the runner's
        _case("<skipped message='not the runner'/>", classname="harness.other"),
    ])
    summary = read_suite(junit, "s").skips
    assert (summary.total, summary.skipped) == (8, 5)
    assert [(r.reason, r.count) for r in summary.reasons] == [
        ("needs fp8", 2), ("(no reason given)", 1), ("needs a GPU", 1), ("not the runner", 1)]
    assert summary.ratio == pytest.approx(5 / 8)


def test_the_top_reasons_do_not_follow_the_order_the_tests_finished_in(
        tmp_path: Path) -> None:
    """xdist writes cases as its workers finish them: two runs of the same tests list the
    same top reasons (ties by their words)."""
    cases = [_case(f"<skipped message='needs op{i}'/>") for i in range(TOP_REASONS + 3)]
    first = read_suite(_junit(tmp_path, cases), "s").skips.reasons
    second = read_suite(_junit(tmp_path, cases[::-1]), "s").skips.reasons
    assert first == second
    assert [r.reason for r in first] == sorted(f"needs op{i}" for i in range(TOP_REASONS + 3)
                                               )[:TOP_REASONS]


def test_reasons_are_the_top_few_cut_to_one_line(tmp_path: Path) -> None:
    cases = [_case(f"<skipped message='reason {i}'/>") for i in range(TOP_REASONS + 2)]
    cases += [_case("<skipped message='" + "y" * 300 + "'/>") for _ in range(2)]
    summary = read_suite(_junit(tmp_path, cases), "s").skips
    assert len(summary.reasons) == TOP_REASONS
    assert summary.reasons[0] == SkipReason(reason="y" * 200, count=2)
    assert summary.skipped == TOP_REASONS + 4  # every skip counted, not only the top


def test_mostly_skipped_is_strictly_over_the_limit() -> None:
    half = SkipSummary(total=4, skipped=2, reasons=())
    assert half.ratio == 0.5 and not half.mostly_skipped(0.5) and half.mostly_skipped(0.49)
    empty = SkipSummary(total=0, skipped=0, reasons=())
    assert empty.ratio == 0.0 and not empty.mostly_skipped(-1.0)
    assert SkipSummary(total=3, skipped=3, reasons=()).mostly_skipped(0.99)
    assert SkipSummary(total=1, skipped=1, reasons=()).mostly_skipped(0.5)  # one test only
