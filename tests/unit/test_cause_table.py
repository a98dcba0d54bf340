"""The one table of failure meaning (harness/results/cause.py) and what reads it: the exit
codes of errors.py, the run's crash rule, the history's labels and the CI templates'
retries all say what the table says."""

from __future__ import annotations

import re

import pytest
import yaml

from harness import errors
from harness.history.infra import guess_label, label_of
from harness.results.cause import (
    MEANINGS,
    RETRIED_EXIT_CODES,
    SELF_INFLICTED,
    Cause,
    CauseRecord,
    cause_of_exit,
    exit_words,
    meaning_of,
    reason_of,
)
from harness.results.outcome import Status, SuiteOutcome
from harness.roots import shipped_root
from harness.run.finish import crashed_itself


def test_every_cause_has_a_meaning_and_only_infrastructure_is_retried() -> None:
    assert set(MEANINGS) == set(Cause)
    assert RETRIED_EXIT_CODES == (3,)
    for cause, meaning in MEANINGS.items():
        assert meaning.retried == (meaning.exit_code in RETRIED_EXIT_CODES), cause
        assert not (meaning.finding and meaning.retried), cause
        assert meaning.words, cause


def test_the_exceptions_exit_with_the_table_s_codes() -> None:
    assert errors.TestsFailed.exit_code == MEANINGS[Cause.TEST_FAILED].exit_code == 1
    assert errors.TestProcessCrashed.exit_code == MEANINGS[Cause.SIGNAL].exit_code == 4
    assert errors.InfraError.exit_code == MEANINGS[Cause.TIMEOUT].exit_code == 3
    assert errors.HostUnavailable.exit_code == MEANINGS[Cause.UNAVAILABLE].exit_code
    assert errors.Interrupted("x").exit_code == MEANINGS[Cause.CANCELLED].exit_code


@pytest.mark.parametrize(
    ("signal", "exit_code", "finding", "label"),
    [
        *((name, 4, True, None) for name in SELF_INFLICTED),  # a finding: no infra
        ("SIGKILL", 3, False, "oom-kill"),
        ("SIGTERM", 3, False, "crashed"),
    ],
)
def test_a_signal_means_what_its_sender_says(
    signal: str, exit_code: int, finding: bool, label: str | None
) -> None:
    record = CauseRecord(cause=Cause.SIGNAL, signal=signal)
    meaning = meaning_of(record)
    assert (meaning.exit_code, meaning.finding) == (exit_code, finding)
    assert label_of(record, gpu=False) == label
    outcome = SuiteOutcome(suite="s", status=Status.CRASHED, exit_code=None, duration_s=0.0,
                           cause=record)
    assert crashed_itself(outcome) is finding
    # an abort on a GPU lane is a GPU hang: infrastructure for the run (exit 3, retried)
    # and for the history alike; every other signal means on a GPU what it means on a CPU
    gpu = meaning_of(record, gpu=True)
    abort = signal == "SIGABRT"
    assert label_of(record, gpu=True) == ("gpu-hang" if abort else label)
    assert crashed_itself(outcome, gpu=True) is (finding and not abort)
    assert (gpu.exit_code, gpu.retried) == ((3, True) if abort else (exit_code, meaning.retried))


def test_a_container_killed_from_outside_is_no_finding_whatever_its_code() -> None:
    record = CauseRecord(cause=Cause.CONTAINER_GONE, exit_code=139)
    outcome = SuiteOutcome(suite="s", status=Status.CRASHED, exit_code=139, duration_s=0.0,
                           cause=record)
    assert not crashed_itself(outcome)
    assert label_of(record, gpu=False) == "docker"


def test_an_outcome_read_without_a_cause_is_judged_by_its_exit_code() -> None:
    for code, finding in ((-6, True), (134, True), (135, True), (-11, True), (137, False),
                          (-9, False), (143, False)):
        outcome = SuiteOutcome(suite="s", status=Status.CRASHED, exit_code=code,
                               duration_s=0.0)
        assert crashed_itself(outcome) is finding, code


def test_the_ci_templates_retry_what_the_table_retries() -> None:
    templates = shipped_root() / "ci" / "templates"
    steps = yaml.safe_load((templates / "buildkite.yml").read_text())["x-harness"]
    for name in ("image_step", "shard_step"):
        codes = {rule["exit_status"] for rule in steps[name]["retry"]["automatic"]}
        # -1: Buildkite's lost agent, not an exit code of harness
        assert tuple(sorted(codes - {-1})) == RETRIED_EXIT_CODES, name
    github = (templates / "github.yml").read_text()
    retried = re.findall(r'if \[ "\$status" != (\d+) \]; then break; fi', github)
    assert tuple(int(code) for code in retried) == RETRIED_EXIT_CODES


@pytest.mark.parametrize(("code", "timed_out", "junit", "status", "words"), [
    (-6, False, True, Status.CRASHED, "crashed: killed by SIGABRT (exit -6)"),
    (134, False, True, Status.CRASHED, "crashed: exit 134 (SIGABRT)"),
    (139, False, False, Status.CRASHED, "crashed: exit 139 (SIGSEGV)"),
    (-9, True, True, Status.TIMEOUT, None),
    (0, False, False, Status.NO_JUNIT, "pytest exit 0 without writing JUnit"),
    (3, False, True, Status.ERROR, "pytest usage or internal error (exit 3)"),
    (1, False, True, Status.PASSED, None),  # a failed test: JUnit decides
])
def test_a_process_s_end_gives_its_status_and_words_from_its_cause(
    code: int, timed_out: bool, junit: bool, status: Status, words: str | None
) -> None:
    """The runners' status and reason come from the cause the end shows, the table's words
    of a signal with no guess at what it means (that is the lane's, meaning_of)."""
    record = cause_of_exit(code, timed_out=timed_out, junit_written=junit)
    assert Status.ended(record) is status
    if words is not None:
        assert record is not None and reason_of(record) == words
    assert "GPU" not in exit_words(134) and "out-of-memory" not in exit_words(137)


@pytest.mark.parametrize(("gpu", "label"), [(True, "gpu-hang"), (False, None),
                                               (None, "gpu-hang")])
def test_a_folder_without_causes_reads_an_abort_by_its_lane(gpu: bool | None,
                                                            label: str | None) -> None:
    """A run folder written before causes were recorded: its crashed suite's exit 134 means
    what the table says on its lane (a CPU lane's: a finding, no infrastructure label,
    whatever its message says); a loose file (no lane known) as vLLM's AMD CI reads it, a
    GPU hang."""
    for code in (134, -6):
        assert guess_label(status="crashed", exit_code=code, gpu=gpu,
                               message="crashed: killed by SIGABRT") == label
    assert guess_label(status="crashed", exit_code=137, gpu=False) == "oom-kill"
