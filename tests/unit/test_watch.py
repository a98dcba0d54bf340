"""The one watch loop (deadline, stop request, Ctrl-C) that local subprocesses and container
execs share, over a command that is a thread: no process, no engine."""

from __future__ import annotations

import threading
import time

from harness.process.watch import Stop, Watched, watch


class Command:
    """A command that runs until it is stopped or ``seconds`` have passed."""

    def __init__(self, seconds: float) -> None:
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.stopped.wait, args=(seconds,), daemon=True)
        self.thread.start()
        self.stops: list[Stop] = []

    def wait(self, seconds: float) -> bool:
        self.thread.join(timeout=seconds)
        return not self.thread.is_alive()

    def stop(self, why: Stop) -> None:
        self.stops.append(why)
        self.stopped.set()


def test_a_command_that_ends_is_not_stopped() -> None:
    cmd = Command(0.1)
    assert watch(cmd.wait, deadline=time.monotonic() + 30, stop=cmd.stop) == Watched()
    assert cmd.stops == []


def test_the_deadline_stops_it_as_a_timeout() -> None:
    cmd = Command(30)
    started = time.monotonic()
    watched = watch(cmd.wait, deadline=started + 0.3, stop=cmd.stop, poll_s=0.05)
    assert watched == Watched(timed_out=True)
    assert cmd.stops == [Stop.TIMEOUT]
    assert time.monotonic() - started < 5


def test_a_stop_request_stops_it_before_the_deadline() -> None:
    cmd = Command(30)
    asked = time.monotonic() + 0.2
    watched = watch(cmd.wait, deadline=time.monotonic() + 30, stop=cmd.stop,
                    stop_requested=lambda: time.monotonic() >= asked, poll_s=0.05)
    assert watched == Watched()
    assert cmd.stops == [Stop.REQUESTED]


def test_ctrl_c_stops_it_as_an_interrupt() -> None:
    cmd = Command(30)
    calls = 0

    def wait(seconds: float) -> bool:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt  # as harness.process.cancel raises on SIGINT
        return cmd.wait(seconds)

    watched = watch(wait, deadline=time.monotonic() + 30, stop=cmd.stop, poll_s=0.01)
    assert watched == Watched(interrupted=True)
    assert cmd.stops == [Stop.INTERRUPT]


def test_ctrl_c_while_a_timed_out_command_stops_stops_it_again() -> None:
    cmd = Command(30)

    def stop(why: Stop) -> None:
        cmd.stops.append(why)
        if why is Stop.TIMEOUT:
            raise KeyboardInterrupt  # pressed while the timeout's graces run
        cmd.stopped.set()

    watched = watch(cmd.wait, deadline=time.monotonic() + 0.1, stop=stop, poll_s=0.05)
    assert watched == Watched(timed_out=True, interrupted=True)
    assert cmd.stops == [Stop.TIMEOUT, Stop.INTERRUPT]
