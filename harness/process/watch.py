"""The one loop that waits for a running command while watching its deadline, a stop its
caller asks for, and Ctrl-C or a CI cancel (SIGTERM / SIGHUP, ``harness.process.cancel``).

A local subprocess (``process/run.py``) and a command exec'd in a container
(``runners/container.py``) wait alike; only how each is stopped differs, and that is the
caller's ``stop``: the step (its signals and graces) for the reason it is given.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

POLL_S = 1.0


class Stop(enum.Enum):
    """Why a command is being stopped."""

    REQUESTED = "requested"  # the caller asked: its output can no longer be written
    TIMEOUT = "timeout"  # it ran past its deadline
    INTERRUPT = "interrupt"  # Ctrl-C, SIGTERM or SIGHUP


@dataclass(frozen=True, kw_only=True)
class Watched:
    """How the wait ended; both can be true (Ctrl-C while a timed-out command stops)."""

    timed_out: bool = False
    interrupted: bool = False


def watch(wait: Callable[[float], bool], *, deadline: float, stop: Callable[[Stop], None],
          stop_requested: Callable[[], bool] = lambda: False,
          poll_s: float = POLL_S) -> Watched:
    """Call ``wait(seconds)`` (True once the command has ended) until it ends; at the
    ``deadline`` (``time.monotonic()``), when ``stop_requested()``, or on an interrupt,
    call ``stop`` with the reason and return. ``stop`` runs inside the watch, so an
    interrupt that arrives while a timed-out command is being stopped stops it again with
    the interrupt's graces."""
    timed_out = interrupted = False
    try:
        while not wait(min(poll_s, max(0.0, deadline - time.monotonic()))):
            if stop_requested():
                stop(Stop.REQUESTED)
                break
            if time.monotonic() >= deadline:
                timed_out = True
                stop(Stop.TIMEOUT)
                break
    except KeyboardInterrupt:  # Ctrl-C, or a SIGTERM / SIGHUP (harness.process.cancel)
        interrupted = True
        stop(Stop.INTERRUPT)
    return Watched(timed_out=timed_out, interrupted=interrupted)
