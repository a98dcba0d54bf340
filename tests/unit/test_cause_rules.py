"""The rules of the one table of what a suite's end means (harness/results/cause.py), each
walked on both sides: an abort on a GPU lane against one on a CPU lane, the signal
conventions at their boundaries (a shell's 128 + N against Popen's negative code, a code
just outside the range) and the property a case carries, as this version writes it and as
an earlier one (or none) left it."""

from __future__ import annotations

import pytest

from harness.results.cause import (
    GPU_ABORT,
    MEANINGS,
    SELF_INFLICTED,
    Cause,
    CauseRecord,
    as_property,
    cause_of_exit,
    exit_signal,
    exit_words,
    from_property,
    meaning_of,
    signal_name,
)


@pytest.mark.parametrize("gpu", [True, False])
def test_an_abort_is_infrastructure_on_a_gpu_lane_and_a_finding_on_a_cpu_lane(
    gpu: bool,
) -> None:
    meaning = meaning_of(CauseRecord(cause=Cause.SIGNAL, signal="SIGABRT"), gpu=gpu)
    if gpu:
        assert meaning is GPU_ABORT
        assert (meaning.exit_code, meaning.retried, meaning.finding, meaning.label) == (
            3, True, False, "gpu-hang")
    else:
        assert meaning is MEANINGS[Cause.SIGNAL]
        assert (meaning.exit_code, meaning.retried, meaning.finding, meaning.label) == (
            4, False, True, None)


def test_an_abort_is_a_finding_when_no_lane_is_named() -> None:
    assert meaning_of(CauseRecord(cause=Cause.SIGNAL, signal="SIGABRT")).finding


@pytest.mark.parametrize("name", [s for s in SELF_INFLICTED if s != "SIGABRT"])
@pytest.mark.parametrize("gpu", [True, False])
def test_every_other_self_inflicted_signal_is_a_finding_on_either_lane(
    name: str, gpu: bool
) -> None:
    meaning = meaning_of(CauseRecord(cause=Cause.SIGNAL, signal=name), gpu=gpu)
    assert meaning is MEANINGS[Cause.SIGNAL]


@pytest.mark.parametrize("gpu", [True, False])
def test_a_signal_from_outside_means_the_same_on_either_lane(gpu: bool) -> None:
    kill = meaning_of(CauseRecord(cause=Cause.SIGNAL, signal="SIGKILL"), gpu=gpu)
    term = meaning_of(CauseRecord(cause=Cause.SIGNAL, signal="SIGTERM"), gpu=gpu)
    unnamed = meaning_of(CauseRecord(cause=Cause.SIGNAL), gpu=gpu)
    assert (kill.label, kill.retried, kill.finding) == ("oom-kill", True, False)
    assert (term.label, term.retried, term.finding) == ("crashed", True, False)
    assert unnamed == term


@pytest.mark.parametrize("cause", [c for c in Cause if c is not Cause.SIGNAL])
@pytest.mark.parametrize("gpu", [True, False])
def test_a_cause_other_than_a_signal_means_its_row_on_either_lane(
    cause: Cause, gpu: bool
) -> None:
    """An abort's signal on another cause (an OOM's record) does not make it a GPU hang."""
    record = CauseRecord(cause=cause, signal="SIGABRT")
    assert meaning_of(record, gpu=gpu) is MEANINGS[cause]


@pytest.mark.parametrize(("record", "value"), [
    (CauseRecord(cause=Cause.SIGNAL, signal="SIGABRT", exit_code=-6), "signal:SIGABRT"),
    (CauseRecord(cause=Cause.OOM, signal="SIGKILL"), "oom:SIGKILL"),
    (CauseRecord(cause=Cause.TIMEOUT, exit_code=-9), "timeout"),
    (CauseRecord(cause=Cause.NO_JUNIT), "no-junit"),
])
def test_a_cause_is_one_property_value_with_its_signal_only_when_it_has_one(
    record: CauseRecord, value: str
) -> None:
    assert as_property(record) == value
    read = from_property(value)
    assert read == CauseRecord(cause=record.cause, signal=record.signal)


@pytest.mark.parametrize(("value", "want"), [
    ("signal:SIGSEGV", CauseRecord(cause=Cause.SIGNAL, signal="SIGSEGV")),
    ("signal", CauseRecord(cause=Cause.SIGNAL)),  # no signal recorded
    ("signal:", CauseRecord(cause=Cause.SIGNAL)),  # an empty one is none
    ("cancelled", CauseRecord(cause=Cause.CANCELLED)),
    ("melted", None),  # a cause this version does not know
    ("melted:SIGABRT", None),
    ("", None),
    (None, None),  # a case written before causes were recorded
])
def test_a_property_written_by_any_version_reads_as_a_cause_or_none(
    value: str | None, want: CauseRecord | None
) -> None:
    assert from_property(value) == want


@pytest.mark.parametrize(("code", "name"), [
    (None, None),
    (0, None),
    (1, None),
    (-1, "SIGHUP"),  # the first negative code is a signal
    (-6, "SIGABRT"),
    (-9, "SIGKILL"),
    (-99, "signal 99"),  # no signal this platform names: its number, positive
    (128, None),
    (129, None),  # a shell's 128 + N: only the crash codes
    (134, "SIGABRT"),
    (135, None),
    (137, "SIGKILL"),
    (139, "SIGSEGV"),
])
def test_a_process_s_signal_is_its_negative_code_or_a_crash_code(
    code: int | None, name: str | None
) -> None:
    assert signal_name(code) == name


@pytest.mark.parametrize(("code", "name"), [
    (None, None),
    (0, None),
    (127, None),
    (128, None),  # 128 + 0 is no signal
    (129, "SIGHUP"),  # the first code past 128 is one
    (134, "SIGABRT"),
    (135, "SIGBUS"),  # any N, not only the crash codes
    (137, "SIGKILL"),
    (143, "SIGTERM"),
    (128 + 99, None),  # 128 + a number no signal has
    (-1, "SIGHUP"),
    (-6, "SIGABRT"),
    (-99, "signal 99"),
])
def test_an_exit_code_names_its_signal_by_either_convention(
    code: int | None, name: str | None
) -> None:
    assert exit_signal(code) == name


@pytest.mark.parametrize(("code", "words"), [
    (None, "no exit code"),
    (0, "exit 0"),
    (-1, "killed by SIGHUP (exit -1)"),
    (-6, "killed by SIGABRT (exit -6)"),
    (-99, "killed by signal 99 (exit -99)"),
    (134, "exit 134 (SIGABRT)"),
    (135, "exit 135"),
])
def test_an_exit_code_s_words_name_its_signal(code: int | None, words: str) -> None:
    assert exit_words(code) == words


@pytest.mark.parametrize(("code", "cause"), [
    (0, None),
    (1, None),
    (2, Cause.PYTEST_ERROR),  # interrupted
    (3, Cause.PYTEST_ERROR),  # internal error
    (4, Cause.PYTEST_ERROR),  # usage error
    (5, None),  # nothing collected
    (-1, Cause.SIGNAL),
    (128, None),
    (None, None),
])
def test_pytest_s_own_error_codes_and_nothing_else_are_a_pytest_error(
    code: int | None, cause: Cause | None
) -> None:
    record = cause_of_exit(code)
    assert (record.cause if record else None) is cause
    if record is not None:
        assert record.exit_code == code
