"""Cancellation as CI does it: SIGTERM (Buildkite, GitHub, a job timeout) and SIGHUP
(a closed terminal) are handled like Ctrl-C.

Inside ``cancel_signals()`` the first SIGINT, SIGTERM or SIGHUP raises in the main
thread (``KeyboardInterrupt`` for SIGINT, ``Cancelled`` for the others), so the same
code that stops a suite on Ctrl-C stops it on a CI cancel. Every later signal only
asks the stop in progress to hurry (``hurry()``), so a SIGTERM that follows a SIGINT
(GitHub's order) cannot cut the clean-up short. Inside ``shield()`` (writing the run
folder at the end) signals are recorded, never raised.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# A CI cancel leaves a short grace (Buildkite 10 s by default, GitHub 7.5 s + 2.5 s):
# the suite gets this long after SIGINT to write its JUnit, then SIGTERM, then SIGKILL.
CANCEL_INTERRUPT_GRACE_S = 4.0
CANCEL_TERMINATE_GRACE_S = 2.0


class Cancelled(KeyboardInterrupt):
    """A SIGTERM or SIGHUP turned into an exception; exits 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(signal.Signals(signum).name)


class _State:
    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        self.count = 0
        self.shielded = 0
        self.lock = threading.Lock()


_state = _State()


def received() -> signal.Signals | None:
    """The first signal this run received, if any."""
    return _state.received


def hurry() -> bool:
    """A second signal arrived: skip the remaining grace and kill."""
    return _state.count > 1


def is_ci_cancel() -> bool:
    return _state.received in (signal.SIGTERM, signal.SIGHUP)


def exit_code() -> int:
    return 128 + int(_state.received) if _state.received is not None else 0


def describe() -> str:
    """How the suite was stopped, for its error case and the manifest."""
    sig = _state.received
    if sig is None or sig is signal.SIGINT:
        return "interrupted (Ctrl-C)"
    return f"cancelled ({sig.name})"


def grace() -> tuple[float, float]:
    """(after SIGINT, after SIGTERM) before the next, harder step."""
    if hurry():
        return 0.0, 0.5
    if is_ci_cancel():
        return CANCEL_INTERRUPT_GRACE_S, CANCEL_TERMINATE_GRACE_S
    return 10.0, 5.0


def _handler(signum: int, frame: FrameType | None) -> None:
    with _state.lock:
        _state.count += 1
        first = _state.received is None
        if first:
            _state.received = signal.Signals(signum)
    if not first or _state.shielded:
        return
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Cancelled(signum)


@contextmanager
def cancel_signals() -> Iterator[None]:
    """Install the handlers for the duration of a run (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.received, _state.count, _state.shielded = None, 0, 0
    previous = {sig: signal.signal(sig, _handler) for sig in HANDLED}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextmanager
def shield() -> Iterator[None]:
    """Record signals without raising while the run folder is being finished."""
    _state.shielded += 1
    try:
        yield
    finally:
        _state.shielded -= 1
