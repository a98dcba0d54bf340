"""The speed sample's quiet machine (plugin/quiet.py), with real file locks: two workers
(each its own open files, as two processes would have) in one process, on threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from harness.plugin import quiet


@pytest.fixture(autouse=True)
def _no_worker_left(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quiet, "_WORKER", [None])  # each QuietWorker registers itself


def _workers(tmp_path: Path) -> tuple[quiet.QuietWorker, quiet.QuietWorker]:
    paths = (tmp_path / "q.lock", tmp_path / "q.intent")
    return quiet.QuietWorker(*paths), quiet.QuietWorker(*paths)


def _running(worker: quiet.QuietWorker) -> object:
    """A test of ``worker`` under way (its call's shared hold taken)."""
    call = worker.pytest_runtest_call(None)  # type: ignore[arg-type]
    next(call)
    return call


def _finish(call: object) -> None:
    with pytest.raises(StopIteration):
        next(call)  # type: ignore[call-overload]


def test_a_measurement_waits_for_the_other_workers_test(tmp_path: Path) -> None:
    measuring, other = _workers(tmp_path)
    mine, theirs = _running(measuring), _running(other)
    seen: list[tuple[bool, float]] = []

    def measure() -> None:
        with measuring.alone() as got:
            seen.append((got, time.monotonic()))

    thread = threading.Thread(target=measure)
    thread.start()
    time.sleep(0.3)
    assert not seen  # the other worker's test still runs
    ended = time.monotonic()
    _finish(theirs)
    thread.join(5)
    assert seen and seen[0][0] and seen[0][1] >= ended
    _finish(mine)


def test_no_test_starts_while_a_measurement_runs(tmp_path: Path) -> None:
    measuring, other = _workers(tmp_path)
    mine = _running(measuring)
    started: list[float] = []

    def next_test() -> None:
        call = _running(other)
        started.append(time.monotonic())
        _finish(call)

    with measuring.alone() as got:
        assert got
        thread = threading.Thread(target=next_test)
        thread.start()
        time.sleep(0.3)
        assert not started  # waits on the measurement's intent
        done = time.monotonic()
    thread.join(5)
    assert started and started[0] >= done
    _finish(mine)


def test_a_hung_test_lets_the_measurement_go_on_and_say_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quiet, "WAIT_S", 0.2)
    measuring, other = _workers(tmp_path)
    theirs = _running(other)  # never ends in time
    with measuring.alone() as got:
        assert got is False
    _finish(theirs)


def test_outside_xdist_the_machine_is_the_measurements(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quiet, "_WORKER", [None])
    with quiet.alone() as got:
        assert got is True
