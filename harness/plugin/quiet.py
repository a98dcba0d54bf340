"""A quiet machine for a speed sample: while one xdist worker of a suite times a kernel
(plugin/speed.py ``measure``), the suite's other workers wait between tests.

On a 2-CPU agent the suite's second worker shares the cores (often two hyperthreads of one
core), its caches and its memory bandwidth with the one that measures; what it runs
meanwhile moved a ratio by 20-40% between identical runs. So every test of a worker holds
the suite's lock shared while it runs, and a measurement takes it exclusive: it waits for
the other workers' running tests to end, and no test starts until it is done. A second
lock, the intent, gives the measurement priority: a test takes and drops the intent
before its shared lock, so a waiting measurement is not starved by tests that follow one
another. A measurement that cannot have the machine within ``WAIT_S`` (a test that hangs)
measures anyway and says so.

The locks are two files in the temp folder named for the suite's pytest controller (the
workers' parent process), removed when its session ends. Outside xdist, nothing.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

WAIT_S = 30.0
POLL_S = 0.01


def lock_paths(controller_pid: int) -> tuple[Path, Path]:
    base = Path(tempfile.gettempdir()) / f"harness-quiet-{controller_pid}"
    return base.with_suffix(".lock"), base.with_suffix(".intent")


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)


def _flock(fd: int, how: int, deadline: float | None) -> bool:
    """Take ``how`` on ``fd``; with a deadline, give up (False) when it passes."""
    if deadline is None:
        fcntl.flock(fd, how)
        return True
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)


class QuietWorker:
    """In each xdist worker: every test's call holds the main lock shared."""

    def __init__(self, main: Path, intent: Path) -> None:
        self.main, self.intent = _open(main), _open(intent)
        _WORKER[0] = self

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        _flock(self.intent, fcntl.LOCK_SH, None)  # a waiting measurement goes first
        fcntl.flock(self.intent, fcntl.LOCK_UN)
        _flock(self.main, fcntl.LOCK_SH, None)
        try:
            yield
        finally:
            fcntl.flock(self.main, fcntl.LOCK_UN)

    @contextmanager
    def alone(self) -> Iterator[bool]:
        """The machine to this worker: True where the other workers wait; False where
        they could not be made to within WAIT_S."""
        fcntl.flock(self.main, fcntl.LOCK_UN)  # its own test's share, as any other's
        deadline = time.monotonic() + WAIT_S
        got = _flock(self.intent, fcntl.LOCK_EX, deadline)
        got = got and _flock(self.main, fcntl.LOCK_EX, deadline)
        try:
            yield got
        finally:
            fcntl.flock(self.main, fcntl.LOCK_SH)  # its test goes on
            fcntl.flock(self.intent, fcntl.LOCK_UN)


class QuietController:
    """In xdist's controller: the locks' files, removed when the session ends."""

    def __init__(self) -> None:
        self.paths = lock_paths(os.getpid())

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        for path in self.paths:
            path.unlink(missing_ok=True)


_WORKER: list[QuietWorker | None] = [None]


def register(config: pytest.Config) -> None:
    """A worker holds its tests' share; the controller cleans up. Without xdist, nothing."""
    if hasattr(config, "workerinput"):
        config.pluginmanager.register(QuietWorker(*lock_paths(os.getppid())), "harness-quiet")
    elif getattr(config.option, "numprocesses", None):
        config.pluginmanager.register(QuietController(), "harness-quiet")


@contextmanager
def alone() -> Iterator[bool]:
    """This worker alone on the machine while the block runs (plugin/speed.py measures in
    it); True outside xdist (no other worker)."""
    worker = _WORKER[0]
    if worker is None:
        yield True
        return
    with worker.alone() as got:
        yield got
