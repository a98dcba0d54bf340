"""Why a suite (or a run) ended abnormally, as data: one vocabulary for every producer,
and one table of what each cause means.

The runners set a :class:`CauseRecord` on the outcome beside its prose reason (a status
plus a reason, as nox's ``Result``); the manifest records it (``cause``), and so does
each case the harness writes when a suite stops (:data:`CAUSE_PROPERTY`). What a cause
means is :data:`MEANINGS` (:func:`meaning_of` for a record): the exit code ``harness run``
gives for it, whether CI tries the step again, whether it is a finding about the code
under test, its words and the history's infrastructure label (``history/infra.py``,
which keeps its regexes for JUnit from other producers and for run folders written
before causes were recorded).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from enum import StrEnum

from harness.errors import Exit

# Exit codes a shell reports for a child killed by a signal (128 + the signal), and the
# ones the harness treats as a crash (see runners/local.py).
_CRASH_CODES = {134: "SIGABRT", 137: "SIGKILL", 139: "SIGSEGV"}


class Cause(StrEnum):
    TIMEOUT = "timeout"  # ran past its time limit and was killed
    SIGNAL = "signal"  # died of a signal (SIGABRT, SIGSEGV, SIGKILL, ...)
    OOM = "oom"  # the out-of-memory killer, seen by the container's counter
    CONTAINER_GONE = "container-gone"  # its container was killed from outside
    NO_JUNIT = "no-junit"  # exited without writing its JUnit file
    PYTEST_ERROR = "pytest-error"  # pytest's usage or internal error (exit 2, 3, 4)
    CANCELLED = "cancelled"  # Ctrl-C, SIGTERM or SIGHUP
    WRITE_FAILED = "write-failed"  # the harness could not write (full disk, read-only)
    # Not a suite's end, but the same table's rows: a run's other ways to fail.
    TEST_FAILED = "test-failed"  # a test failed (or strictly xpassed)
    COLLECTION_ERROR = "collection-error"  # a test module failed to import
    INFRA_REFUSAL = "infra-refusal"  # a prerequisite, image, docker, probe or cache refused
    UNAVAILABLE = "unavailable"  # the matrix's device or probe refuses this host


@dataclass(frozen=True, kw_only=True)
class Meaning:
    """What a cause means; the words are derived where it is shown."""

    exit_code: int  # harness run's, when this is the worst of the run
    retried: bool  # CI tries the step again (the exit codes in RETRIED_EXIT_CODES)
    finding: bool  # about the code under test, not the infrastructure
    words: str
    label: str | None = None  # the history's infrastructure label: none for a finding


# The signals a test process raises itself (os.abort(), a segfaulting kernel, an illegal
# instruction): a finding a retry would only repeat. SIGKILL comes from outside (the
# out-of-memory killer, the agent), and so does any other.
SELF_INFLICTED = ("SIGABRT", "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE")
_INFRA = Exit.INFRA
MEANINGS: dict[Cause, Meaning] = {
    Cause.TEST_FAILED: Meaning(exit_code=Exit.FAILED, retried=False, finding=True,
                               words="a test failed"),
    Cause.COLLECTION_ERROR: Meaning(exit_code=Exit.FAILED, retried=False, finding=True,
                                    words="a test module failed to import"),
    # A finding has no infrastructure label: the history and the report count its
    # cases with the suite's failures, as the run's exit code does.
    Cause.SIGNAL: Meaning(exit_code=Exit.CRASHED, retried=False, finding=True,
                          words="a test process crashed by its own signal"),
    Cause.TIMEOUT: Meaning(exit_code=_INFRA, retried=True, finding=False, label="timeout",
                           words="ran past its time limit and was killed"),
    Cause.OOM: Meaning(exit_code=_INFRA, retried=True, finding=False, label="oom-kill",
                       words="killed by the out-of-memory killer"),
    Cause.CONTAINER_GONE: Meaning(exit_code=_INFRA, retried=True, finding=False,
                                  label="docker",
                                  words="its container was killed from outside"),
    Cause.NO_JUNIT: Meaning(exit_code=_INFRA, retried=True, finding=False,
                            label="missing-junit", words="ended without writing JUnit"),
    Cause.PYTEST_ERROR: Meaning(exit_code=_INFRA, retried=True, finding=False,
                                words="pytest's usage or internal error"),
    Cause.CANCELLED: Meaning(exit_code=130, retried=False, finding=False,
                             words="cancelled (Ctrl-C, SIGTERM, SIGHUP)"),
    Cause.WRITE_FAILED: Meaning(exit_code=_INFRA, retried=True, finding=False,
                                words="the harness could not write its results"),
    Cause.INFRA_REFUSAL: Meaning(exit_code=_INFRA, retried=True, finding=False,
                                 words="the infrastructure refused (prerequisite, image, "
                                       "docker, probe, cold cache)"),
    Cause.UNAVAILABLE: Meaning(exit_code=_INFRA, retried=True, finding=False,
                               words="this host is not the matrix's (--skip-unavailable: "
                                     "a skipped run, exit 0)"),
}
# A signal from outside: the run's results are incomplete, not wrong.
_KILLED = Meaning(exit_code=_INFRA, retried=True, finding=False, label="crashed",
                  words="a test process was killed from outside")
_BY_SIGNAL = {"SIGKILL": Meaning(exit_code=_INFRA, retried=True, finding=False,
                                 label="oom-kill",
                                 words="killed by SIGKILL (the out-of-memory killer, the "
                                       "agent)")}
RETRIED_EXIT_CODES = tuple(sorted({m.exit_code for m in MEANINGS.values() if m.retried}))


@dataclass(frozen=True, kw_only=True)
class CauseRecord:
    cause: Cause
    signal: str | None = None  # "SIGABRT", for Cause.SIGNAL and Cause.OOM
    exit_code: int | None = None


# On a GPU lane (the probe found the GPU; not emulated) a test process that aborts is the
# GPU's runtime giving up on the device: HIP and the HSA runtime abort() on a queue or
# memory fault and on a hang (exit 134), and CUDA's driver on some Xid faults. vLLM's own
# AMD CI retries exit 134 as a GPU hang, and so does this table: the run's results are
# incomplete for a reason outside the code under test, so it is infrastructure (exit 3,
# retried) and "gpu-hang" in the history. A kernel bug on a GPU shows as a device-side
# assert or an illegal memory access, which torch raises as a RuntimeError: a failed
# test, not an abort. On a CPU lane (an emulated GPU profile included) nothing but the
# test process itself aborts, so there an abort stays a finding (exit 4, never retried).
GPU_ABORT = Meaning(exit_code=_INFRA, retried=True, finding=False, label="gpu-hang",
                    words="a GPU lane's test process aborted: the GPU runtime gave up on "
                          "the device (a GPU hang)")


def meaning_of(record: CauseRecord, *, gpu: bool = False) -> Meaning:
    """What a recorded cause means: a signal's by who sent it, and an abort by the lane
    (``gpu``: the suites ran on a GPU the probe found)."""
    if record.cause is Cause.SIGNAL and record.signal == "SIGABRT" and gpu:
        return GPU_ABORT
    if record.cause is Cause.SIGNAL and record.signal not in SELF_INFLICTED:
        return _BY_SIGNAL.get(record.signal or "", _KILLED)
    return MEANINGS[record.cause]


# The property a case the harness writes (a test a stopped suite was running, the suite's
# own error case) carries in the sidecar: its cause, so the history need not guess it
# from the message (a SIGABRT on a CPU is no GPU hang).
CAUSE_PROPERTY = "harness.cause"


def as_property(record: CauseRecord) -> str:
    """``signal:SIGABRT``, ``timeout``: a cause as one property value."""
    return f"{record.cause.value}:{record.signal}" if record.signal else record.cause.value


def from_property(value: str | None) -> CauseRecord | None:
    """The cause a case's property records (None for none, or one this version does not
    know)."""
    if not value:
        return None
    name, _, sig = value.partition(":")
    try:
        return CauseRecord(cause=Cause(name), signal=sig or None)
    except ValueError:
        return None


def signal_name(exit_code: int | None) -> str | None:
    """The signal a process died of: a negative code (Popen), or 134 / 137 / 139."""
    if exit_code is None:
        return None
    if exit_code < 0:
        try:
            return signal.Signals(-exit_code).name
        except ValueError:
            return f"signal {-exit_code}"
    return _CRASH_CODES.get(exit_code)


def exit_signal(exit_code: int | None) -> str | None:
    """The signal an exit code names by either convention: negative (Popen) or a shell's
    128 + N (any N, where :func:`signal_name` knows only the crash codes)."""
    if exit_code is not None and exit_code > 128:
        try:
            return signal.Signals(exit_code - 128).name
        except ValueError:
            return None
    return signal_name(exit_code)


def exit_words(code: int | None) -> str:
    """An exit code in words, a signal by its name (``killed by SIGABRT (exit -6)``, ``exit
    134 (SIGABRT)``): what it says, not what it means (that is :func:`meaning_of`'s, by the
    lane: an abort on a GPU lane is a GPU hang, on a CPU lane a crash)."""
    if code is None:
        return "no exit code"
    name = signal_name(code)
    if code < 0:
        return f"killed by {name} (exit {code})"
    return f"exit {code} ({name})" if name else f"exit {code}"


def reason_of(record: CauseRecord) -> str:
    """The words a suite's reason begins with for a cause the process's end shows (a
    timeout's, a cancel's and a failed write's carry what only their runner knows)."""
    code = exit_words(record.exit_code)
    if record.cause is Cause.SIGNAL:
        return f"crashed: {code}"
    if record.cause is Cause.NO_JUNIT:
        return f"pytest {code} without writing JUnit"
    if record.cause is Cause.PYTEST_ERROR:
        return f"pytest usage or internal error ({code})"
    return MEANINGS[record.cause].words


def cause_of_exit(
    exit_code: int | None,
    *,
    timed_out: bool = False,
    cancelled: bool = False,
    write_failed: bool = False,
    junit_written: bool = True,
) -> CauseRecord | None:
    """How a suite process ended, before its JUnit is read; None when it ended as pytest
    does (passed, failed, nothing collected)."""
    if write_failed:
        return CauseRecord(cause=Cause.WRITE_FAILED, exit_code=exit_code)
    if cancelled:
        return CauseRecord(cause=Cause.CANCELLED, exit_code=exit_code)
    if timed_out:
        return CauseRecord(cause=Cause.TIMEOUT, exit_code=exit_code)
    name = signal_name(exit_code)
    if name is not None:
        return CauseRecord(cause=Cause.SIGNAL, signal=name, exit_code=exit_code)
    if not junit_written:
        return CauseRecord(cause=Cause.NO_JUNIT, exit_code=exit_code)
    if exit_code in (2, 3, 4):
        return CauseRecord(cause=Cause.PYTEST_ERROR, exit_code=exit_code)
    return None
