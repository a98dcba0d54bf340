"""The local runner's fork server (process/forkserver.py): started in the suites' own
interpreter and environment at the first suite that can use it, kept for the run, stopped
with the runner.

A suite runs forked from it when the matrix preloads modules (``runtime.preload``) and the
suite runs in one process (one worker: xdist's workers start fresh interpreters of their
own, so they would gain nothing). Its command becomes the stand-in, ``python
.../process/forkserver.py run SOCKET -- <the suite's command>``, in harness's own
interpreter (it imports nothing but the standard library and passes file descriptors), so
everything else about the suite (its log, timeout, crash reading, salvaged results) is as
for a fresh process.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.process import forkserver
from harness.process.run import TERMINATE_TIMEOUT_S, start_background, stop_group
from harness.runners.invocation import Invocation

SCRIPT = Path(forkserver.__file__)  # run as a file: no harness package in the server
_START_TIMEOUT_S = 900.0  # an engine's import under an emulated CPU takes minutes


class ForkServer:
    """One server per run; ``argv_for`` says how a suite runs (forked, or as it was)."""

    def __init__(self, modules: Sequence[str], say: Callable[[str], None] = print) -> None:
        self.modules = tuple(modules)
        self._say = say
        self._proc: subprocess.Popen[str] | None = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._socket: Path | None = None
        self.state = ""  # "ready: ...", "unsafe: ...", or why it did not start

    def argv_for(self, inv: Invocation, env: Mapping[str, str]) -> tuple[str, ...]:
        if not self.modules or inv.workers > 1 or inv.argv[1:3] != ("-m", "pytest"):
            return inv.argv
        if self._proc is None and not self.state:
            self._start(inv.argv[0], env, inv.cwd)
        if self._socket is None:
            return inv.argv
        return (sys.executable, str(SCRIPT), "run", str(self._socket), "--", *inv.argv)

    def _start(self, python: str, env: Mapping[str, str], cwd: Path | None) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="harness-fork-")
        socket_path = Path(self._folder.name) / "server.sock"
        argv = [python, str(SCRIPT), "serve", str(socket_path), *self.modules]
        try:
            self._proc = start_background(argv, env=env, cwd=cwd)
            first = _first_line(self._proc, _START_TIMEOUT_S)
        except OSError as exc:
            first = f"not started: {exc}"
        self.state = first or "the server ended before it was ready"
        if first.startswith("ready"):
            self._socket = socket_path
            self._say(f"harness: fork server {self.state}; one-worker suites run forked "
                      "from it")
        else:
            self._say(f"harness: fork server {self.state}; the suites run in fresh processes")
            self.stop()
            self.state = self.state or "not started"

    def stop(self) -> None:
        if self._proc is not None:
            stop_group(self._proc, ((signal.SIGTERM, TERMINATE_TIMEOUT_S),))
            if self._proc.stdout is not None:  # the ready line's pipe
                self._proc.stdout.close()
            self._proc = None
        self._socket = None
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None


def _first_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """The server's tagged line ("ready: ..." / "unsafe: ..."), past what its imports
    logged; why not, where it ends or says nothing in time."""
    import selectors
    import time

    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                return f"not ready after {timeout_s:g} s"
            line = proc.stdout.readline()
            if line.startswith(forkserver.TAG):
                return line[len(forkserver.TAG):].strip()
            if not line:
                proc.wait()
                return f"ended with exit {proc.returncode} while importing"

