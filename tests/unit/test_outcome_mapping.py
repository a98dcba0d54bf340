"""The history's outcome mapping: one JUnit ``<testcase>`` (any producer's dialect) to the
status the history stores (harness.results.junit_expat.case_status). A failure read as a
pass, or an xfail read as a skip, would make every report after it lie."""

from __future__ import annotations

import pytest

from harness.results.junit_expat import _MESSAGE_LIMIT, case_status


def child(tag: str, text: str = "", **attrs: str) -> tuple[str, dict[str, str], str]:
    return tag, attrs, text


@pytest.mark.parametrize(("attrs", "children", "want"), [
    ({}, [], ("passed", "", 0)),
    ({}, [child("failure", "trace", message="boom")], ("failed", "boom", 0)),
    ({}, [child("failure", "first line\nsecond")], ("failed", "first line", 0)),
    ({}, [child("failure", message="[XPASS(strict)] known")],
     ("xpass", "[XPASS(strict)] known", 0)),
    ({}, [child("error", message="fixture")], ("error", "fixture", 0)),
    # a failure and an error in teardown: the failure is what the test did
    ({}, [child("failure", message="f"), child("error", message="e")], ("failed", "f", 0)),
    ({}, [child("error", message="e"), child("failure", message="f")], ("failed", "f", 0)),
    ({}, [child("skipped", message="needs fp8")], ("skipped", "needs fp8", 0)),
    ({}, [child("skipped", type="pytest.xfail", message="known")], ("xfail", "known", 0)),
    ({}, [child("skipped", message="expected test failure")],
     ("xfail", "expected test failure", 0)),
    # a skip after a failure (a teardown skip) does not hide the failure
    ({}, [child("failure", message="f"), child("skipped", message="s")], ("failed", "f", 0)),
    ({}, [child("error", message="e"), child("skipped", message="s")], ("error", "e", 0)),
    # reruns: each earlier attempt counts; the first message is kept when none other
    ({}, [child("rerunFailure", message="try 1"), child("rerunFailure", message="try 2")],
     ("passed", "try 1", 2)),
    ({}, [child("flakyFailure", message="try 1"), child("failure", message="last")],
     ("failed", "last", 1)),
    ({}, [child("failure", message="last"), child("rerunFailure", message="try")],
     ("failed", "last", 1)),
    # gtest / ctest attributes
    ({"result": "skipped"}, [], ("skipped", "", 0)),
    ({"result": "suppressed"}, [], ("skipped", "", 0)),
    ({"status": "notrun"}, [], ("skipped", "", 0)),
    ({"status": "disabled"}, [], ("skipped", "", 0)),
    ({"status": "fail"}, [], ("failed", "", 0)),
    ({"status": "run", "result": "completed"}, [], ("passed", "", 0)),
    ({"status": "fail"}, [child("skipped", message="s")], ("skipped", "s", 0)),
])
def test_case_status(attrs: dict[str, str], children: list[tuple[str, dict[str, str], str]],
                     want: tuple[str, str, int]) -> None:
    assert case_status(attrs, children) == want


def test_messages_are_cut_to_the_limit() -> None:
    status, message, _ = case_status({}, [child("failure", message="x" * (_MESSAGE_LIMIT + 9))])
    assert status == "failed" and len(message) == _MESSAGE_LIMIT
