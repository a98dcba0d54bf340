"""Causes as data: what the runners record, what the manifest keeps, what the history
names from it (and, for what records no cause, from the kind and the message)."""

from __future__ import annotations

import json

import pytest

from harness.errors import ConfigError
from harness.history.infra import guess_label, label_of
from harness.results.cause import Cause, CauseRecord, cause_of_exit
from harness.results.facts import DeviceFingerprint
from harness.results.manifest import InfraFailure, MatrixRef, RunRecord
from harness.results.outcome import Counts, SkipReason, Status, SuiteOutcome


@pytest.mark.parametrize(("code", "flags", "want"), [
    (0, {}, None),
    (1, {}, None),
    (5, {}, None),
    (-6, {}, CauseRecord(cause=Cause.SIGNAL, signal="SIGABRT", exit_code=-6)),
    (134, {}, CauseRecord(cause=Cause.SIGNAL, signal="SIGABRT", exit_code=134)),
    (137, {}, CauseRecord(cause=Cause.SIGNAL, signal="SIGKILL", exit_code=137)),
    (-11, {}, CauseRecord(cause=Cause.SIGNAL, signal="SIGSEGV", exit_code=-11)),
    (3, {}, CauseRecord(cause=Cause.PYTEST_ERROR, exit_code=3)),
    (0, {"junit_written": False}, CauseRecord(cause=Cause.NO_JUNIT, exit_code=0)),
    (-9, {"timed_out": True}, CauseRecord(cause=Cause.TIMEOUT, exit_code=-9)),
    (-2, {"cancelled": True}, CauseRecord(cause=Cause.CANCELLED, exit_code=-2)),
    (1, {"write_failed": True, "timed_out": True},
     CauseRecord(cause=Cause.WRITE_FAILED, exit_code=1)),
])
def test_cause_of_exit(code: int, flags: dict[str, bool], want: CauseRecord | None) -> None:
    assert cause_of_exit(code, **flags) == want


@pytest.mark.parametrize("gpu", [True, False])
def test_an_abort_is_a_gpu_hang_only_where_a_gpu_ran(gpu: bool) -> None:
    """ROCm aborts (exit 134) on a GPU hang; on a CPU lane an abort is the test process
    crashing itself (a finding, exit 4), not a hang."""
    abort = CauseRecord(cause=Cause.SIGNAL, signal="SIGABRT", exit_code=-6)
    assert label_of(abort, gpu=gpu) == ("gpu-hang" if gpu else None)


@pytest.mark.parametrize(("cause", "label"), [
    (CauseRecord(cause=Cause.SIGNAL, signal="SIGKILL"), "oom-kill"),
    (CauseRecord(cause=Cause.SIGNAL, signal="SIGSEGV"), None),  # a finding
    # a timeout is killed by a signal too: the cause says which it was
    (CauseRecord(cause=Cause.TIMEOUT, exit_code=-9), "timeout"),
    (CauseRecord(cause=Cause.OOM, signal="SIGKILL"), "oom-kill"),
    (CauseRecord(cause=Cause.CONTAINER_GONE, exit_code=137), "docker"),
    (CauseRecord(cause=Cause.NO_JUNIT), "missing-junit"),
    (CauseRecord(cause=Cause.PYTEST_ERROR, exit_code=3), None),
    (CauseRecord(cause=Cause.CANCELLED), None),
])
def test_signature_of_a_recorded_cause(cause: CauseRecord, label: str | None) -> None:
    assert label_of(cause, gpu=True) == label == label_of(cause, gpu=False)


@pytest.mark.parametrize(("kind", "message", "label"), [
    # what run/finish.py writes: the first infrastructure suite's status and reason; a
    # folder without causes called its crashed run "crashed", as before causes
    ("crashed", "crashed: exit 134 (SIGABRT: an abort, on ROCm typically a GPU hang)",
     "crashed"),
    ("crashed", "crashed: killed by SIGSEGV (exit -11)", "crashed"),
    ("timeout", "timeout: step ran past 5 s and was killed", "timeout"),
    ("no-junit", "pytest exit 0 without writing JUnit", "missing-junit"),
    ("error", "pytest usage or internal error (exit 3)", "error"),
    ("write-failed", "could not write", "write-failed"),
    ("infra", "image build failed", "image"),
])
def test_kinds_the_harness_writes(kind: str, message: str, label: str) -> None:
    assert guess_label(kind=kind, message=message) == label


def _record(**suite: object) -> RunRecord:
    outcome = SuiteOutcome(suite="e2e", status=Status.CRASHED, exit_code=-6, duration_s=1.5,
                           reason="crashed: killed by SIGABRT (exit -6)", junit="junit/e2e.xml",
                           log="logs/e2e.log", counts=Counts(passed=2, error=1),
                           skip_reasons=[SkipReason(reason="needs fp8", count=1)],
                           cause=CauseRecord(cause=Cause.SIGNAL, signal="SIGABRT", exit_code=-6))
    for key, value in suite.items():
        setattr(outcome, key, value)
    failure = InfraFailure(kind="crashed", suite="e2e", message=outcome.reason,
                           cause=outcome.cause)
    return RunRecord(run_id="r1", matrix=MatrixRef(name="cpu"), suites=[outcome],
                     infra_error=failure)


def test_the_manifest_keeps_the_cause() -> None:
    record = _record()
    data = json.loads(record.to_json())
    assert data["suites"][0]["cause"] == {"cause": "signal", "signal": "SIGABRT",
                                          "exit_code": -6}
    assert data["suites"][0]["status"] == "crashed"
    assert data["suites"][0]["skip_reasons"] == [{"reason": "needs fp8", "count": 1}]
    assert RunRecord.from_json(record.to_json(), "manifest.json") == record


def test_an_older_manifest_has_no_cause() -> None:
    data = json.loads(_record().to_json())
    del data["suites"][0]["cause"], data["infra_error"]["cause"]
    read = RunRecord.from_json(json.dumps(data), "manifest.json")
    assert read.suites[0].cause is None and read.infra_error is not None
    assert read.infra_error.cause is None


@pytest.mark.parametrize(("where", "value", "key"), [
    ("cause", "melted", "suites[0].cause.cause"),
    ("signal", 6, "suites[0].cause.signal"),
])
def test_a_bad_cause_is_named(where: str, value: object, key: str) -> None:
    data = json.loads(_record().to_json())
    data["suites"][0]["cause"][where] = value
    with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]")):
        RunRecord.from_json(json.dumps(data), "manifest.json")


def test_a_bad_status_is_named() -> None:
    data = json.loads(_record().to_json())
    data["suites"][0]["status"] = "melted"
    with pytest.raises(ConfigError, match=r"suites\[0\]\.status"):
        RunRecord.from_json(json.dumps(data), "manifest.json")


@pytest.mark.parametrize(("kind", "emulate", "on_gpu"), [
    ("amd-smi", False, True), ("nvidia-smi", False, True), ("xpu-smi", False, True),
    ("amd-smi", True, False),  # an emulated run's suites ran on the CPU
    ("lscpu", False, False), ("s390x", False, False), (None, False, False),
])
def test_a_run_ran_on_a_gpu_where_a_gpu_tool_probed_it(
    kind: str | None, emulate: bool, on_gpu: bool
) -> None:
    fingerprint = DeviceFingerprint({"kind": kind}) if kind else None
    record = RunRecord(run_id="r1", matrix=MatrixRef(name="rocm"), emulate=emulate,
                       device_fingerprint=fingerprint)
    assert record.on_gpu is on_gpu
