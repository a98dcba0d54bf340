"""Faults in a local run keep every result already written (real subprocesses).

A test fails before the fault, so salvage that wrote an earlier failure as a pass (or
dropped it) shows here, not only in the docker fault tests."""

from __future__ import annotations

import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.results.outcome import Counts, SkipReason, Status
from harness.runners.invocation import Invocation
from harness.runners.local import LocalRunner

TESTS = """
import os, signal, time

def test_one():
    assert True

def test_two_fails():
    assert False, "an earlier failure"

def test_fault():
    {fault}

def test_after():
    assert True
"""


def invocation(tmp_path: Path, fault: str, timeout_s: float = 60.0) -> Invocation:
    suite_dir = tmp_path / "suite"
    suite_dir.mkdir()
    (suite_dir / "test_faulty.py").write_text(textwrap.dedent(TESTS.format(fault=fault)))
    run = tmp_path / "run"
    junit = run / "junit" / "faulty.xml"
    partial = run / "junit" / "faulty.partial.jsonl"
    argv = (
        sys.executable,
        "-m",
        "pytest",
        str(suite_dir),
        "-p",
        "no:cacheprovider",
        # node ids relative to the suite, wherever the checkout lives: without it, a checkout
        # in the temp folder makes pytest's rootdir the common ancestor of both
        f"--rootdir={suite_dir}",
        f"--junitxml={junit}",
        f"--harness-partial={partial}",
        "-q",
    )
    return Invocation(
        suite="faulty",
        argv=argv,
        env={},
        junit=junit,
        log=run / "logs" / "faulty.log",
        partial=partial,
        timeout_s=timeout_s,
        workers=1,
    )


def cases(junit: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        out[case.get("name", "")] = kinds[0] if kinds else "passed"
    return out


def messages(junit: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                out[case.get("name", "")] = child.get("message", "")
    return out


def run_one(inv: Invocation):  # type: ignore[no-untyped-def]
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    with LocalRunner(base_env=env, echo=None).started(inv.junit.parents[1], [inv]) as runner:
        (outcome,) = runner.run()
    return outcome


def test_segfault_keeps_results_and_names_signal(tmp_path: Path) -> None:
    inv = invocation(tmp_path, "os.kill(os.getpid(), signal.SIGSEGV)")
    outcome = run_one(inv)
    assert outcome.status is Status.CRASHED
    assert "SIGSEGV" in outcome.reason
    got = cases(inv.junit)
    assert got["test_one"] == "passed" and got["test_two_fails"] == "failure"
    assert got["faulty: crashed: killed by SIGSEGV (exit -11)"] == "error"
    # The test that crashed is an error of its own; the one after is listed, as not run.
    crashed = "test_faulty.py::test_fault"
    assert outcome.reason.endswith(f" in {crashed}")
    assert got["test_fault"] == "error" and got["test_after"] == "skipped"
    assert messages(inv.junit)["test_after"] == f"not run: the suite crashed in {crashed}"


def test_abort_is_exit_134_like(tmp_path: Path) -> None:
    outcome = run_one(invocation(tmp_path, "os.abort()"))
    assert outcome.status is Status.CRASHED and "SIGABRT" in outcome.reason


def test_hang_past_step_timeout_is_killed(tmp_path: Path) -> None:
    inv = invocation(tmp_path, "time.sleep(600)", timeout_s=8)
    outcome = run_one(inv)
    assert outcome.status is Status.TIMEOUT
    assert outcome.duration_s < 30
    got = cases(inv.junit)
    assert got["test_one"] == "passed" and got["test_two_fails"] == "failure"
    assert any("timeout" in name and kind == "error" for name, kind in got.items())
    # The hang names the test that hung (the log's tail is only pytest's progress dots).
    hung = "test_faulty.py::test_fault"
    said = messages(inv.junit)
    assert said["faulty: timeout: step ran past 8 s and was killed"].endswith(f" in {hung}")
    assert said["test_fault"].endswith("while this test ran")
    assert said["test_after"] == f"not run: the suite timed out in {hung}"


def test_plain_failure_is_failed_not_infra(tmp_path: Path) -> None:
    inv = invocation(tmp_path, "assert 1 == 2")
    outcome = run_one(inv)
    assert outcome.status is Status.FAILED and not outcome.status.unfinished
    assert cases(inv.junit)["test_fault"] == "failure"
    assert outcome.counts == Counts(passed=2, failed=2)


def test_exit_zero_without_junit_is_infra(tmp_path: Path) -> None:
    inv = invocation(tmp_path, "assert True")
    inv = Invocation(**{**inv.__dict__, "argv": (sys.executable, "-c", "print('hi')")})
    outcome = run_one(inv)
    assert outcome.status is Status.NO_JUNIT and outcome.status.unfinished
    assert "without writing JUnit" in outcome.reason


MOSTLY_SKIPPED = """
import pytest

@pytest.mark.parametrize("i", range(8))
def test_needs_new_wheel(i):
    pytest.skip("engine wheel lacks fused_op")

def test_old_api():
    pytest.skip("old api gone")

def test_runs():
    assert True

@pytest.mark.xfail(reason="known", strict=True)
def test_known():
    assert False
"""


def test_a_suite_that_mostly_skips_is_not_green(tmp_path: Path) -> None:
    inv = invocation(tmp_path, "pass")
    (tmp_path / "suite" / "test_faulty.py").write_text(MOSTLY_SKIPPED)
    outcome = run_one(inv)
    # 9 of 11 cases skip (the xfail is not a skip): over the default 0.5.
    assert outcome.status is Status.MOSTLY_SKIPPED and outcome.mostly_skipped
    assert outcome.skip_ratio == pytest.approx(9 / 11, abs=1e-4)
    assert outcome.skip_reasons == [
        SkipReason(reason="engine wheel lacks fused_op", count=8),
        SkipReason(reason="old api gone", count=1),
    ]
    assert outcome.reason == "mostly skipped: 9 of 11 (82% > max_skip_ratio 0.5)"
    lenient = Invocation(**{**inv.__dict__, "max_skip_ratio": 0.9})
    lenient.junit.unlink()
    again = run_one(lenient)
    assert again.status is Status.PASSED and not again.mostly_skipped
