"""Why a suite (or a run) ended abnormally, as data: one vocabulary for every producer.

The runners set a :class:`CauseRecord` on the outcome beside its prose reason; the
manifest records it (``cause``); the history names the infrastructure failure from it
(``history/infra.py``), and keeps its regexes for loose JUnit from other producers and
for run folders written before causes were recorded.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from enum import StrEnum

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


@dataclass(frozen=True, kw_only=True)
class CauseRecord:
    cause: Cause
    signal: str | None = None  # "SIGABRT", for Cause.SIGNAL and Cause.OOM
    exit_code: int | None = None


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
