"""Every external command of a run goes through here.

The child gets its own process group, so a timeout or Ctrl-C stops the whole tree
(pytest and its xdist workers) with named, bounded steps: interrupt, terminate, kill.
Output is streamed line by line with a prefix, and kept in a log file and a tail.
The output reader never dies silently: a log that cannot be written (a full disk)
stops the child within seconds and is reported; a console that went away (SIGHUP)
only stops the echo.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import AnyStr, TextIO

from harness.process import cancel
from harness.process.secret_names import scrub
from harness.process.watch import Stop, watch
from harness.results.writefail import QuietClose
from harness.results.writefail import describe as describe_write_failure

TERMINATE_TIMEOUT_S = 5.0
# After a failed write: the child gets this long to notice SIGINT, then SIGTERM, SIGKILL.
WRITE_FAILURE_GRACE_S = 2.0
POLL_S = 0.2
TAIL_LINES = 40


@dataclass(kw_only=True)
class ProcResult:
    """How one streamed command ended, a local subprocess or a command exec'd in a
    container alike: what ``runners/local.py outcome_of`` turns into a suite's outcome."""

    exit_code: int | None
    duration_s: float
    timed_out: bool = False
    interrupted: bool = False
    write_error: str = ""
    tail: list[str] = field(default_factory=list)


def _wait(proc: subprocess.Popen[AnyStr], seconds: float) -> bool:
    """Wait up to ``seconds``, in slices, giving up early when a second signal hurries."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            proc.wait(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
            return True
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline or cancel.hurry():
                return False


def stop_group(
    proc: subprocess.Popen[AnyStr], steps: tuple[tuple[signal.Signals, float], ...]
) -> None:
    """Send each signal to the child's process group with its bound, then SIGKILL."""
    for sig, wait in (*steps, (signal.SIGKILL, TERMINATE_TIMEOUT_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        if _wait(proc, wait):
            # The leader is gone; xdist workers in its group may linger: kill them too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return


def _stop_steps(why: Stop) -> tuple[tuple[signal.Signals, float], ...]:
    """The signals (and the wait after each) that stop a suite's process group."""
    if why is Stop.REQUESTED:  # its log cannot be written: SIGINT still lets pytest finish
        return (signal.SIGINT, WRITE_FAILURE_GRACE_S), (signal.SIGTERM, TERMINATE_TIMEOUT_S)
    if why is Stop.TIMEOUT:
        return ((signal.SIGTERM, TERMINATE_TIMEOUT_S),)
    after_int, after_term = cancel.grace()
    return (signal.SIGINT, after_int), (signal.SIGTERM, after_term)


def run_streaming(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log_path: Path,
    prefix: str,
    timeout_s: float,
    cwd: Path | None = None,
    echo: TextIO | None = sys.stdout,
    on_line: Callable[[str], None] | None = None,
) -> ProcResult:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    start = time.monotonic()
    # Line-buffered: each line reaches the file (or fails) as it is written.
    with QuietClose(log_path.open("a", encoding="utf-8", buffering=1)) as log:
        log.write(f"$ {shlex.join(argv)}\n")
        log.flush()
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        sink = LineSink(log, log_path, echo, prefix, tail, on_line)
        reader = threading.Thread(target=sink.pump, args=(proc,), daemon=True)
        reader.start()

        watched = watch(lambda seconds: _wait(proc, seconds), deadline=start + timeout_s,
                        stop=lambda why: stop_group(proc, _stop_steps(why)),
                        stop_requested=lambda: bool(sink.error))
        reader.join(timeout=5)
        if watched.timed_out:
            sink.note(f"harness: killed after {timeout_s:g} s (step timeout)")
    return ProcResult(
        exit_code=proc.returncode,
        duration_s=time.monotonic() - start,
        timed_out=watched.timed_out,
        interrupted=watched.interrupted,
        write_error=sink.error,
        tail=list(tail),
    )


@dataclass(frozen=True)
class Captured:
    returncode: int
    stdout: str
    stderr: str


def run_captured(argv: Sequence[str], *, timeout_s: float, cwd: Path | None = None,
                 env: Mapping[str, str] | None = None) -> Captured:
    """A short command whose output is read whole (git, a device probe, a collection, pip).

    The child has its own process group, as in ``run_streaming``: at the timeout, or on
    Ctrl-C / a CI cancel, the whole tree is stopped (SIGTERM, then SIGKILL) and
    ``subprocess.TimeoutExpired`` (or the interrupt) is raised. A program that cannot be
    started raises OSError, for the caller to word.
    """
    proc = subprocess.Popen(list(argv), cwd=cwd, env=None if env is None else dict(env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except BaseException:  # the timeout, Ctrl-C, SIGTERM / SIGHUP (harness.process.cancel)
        stop_group(proc, ((signal.SIGTERM, TERMINATE_TIMEOUT_S),))
        proc.communicate()
        raise
    return Captured(returncode=proc.returncode, stdout=out, stderr=err)


def run_attached(argv: Sequence[str], *, env: Mapping[str, str]) -> int:
    """A command whose output goes straight to this terminal (``harness kernels`` run again
    in the matrix's interpreter); Ctrl-C stops its whole process group. Its exit code."""
    proc = subprocess.Popen(list(argv), env=dict(env), start_new_session=True)
    try:
        return proc.wait()
    except BaseException:
        after_int, after_term = cancel.grace()
        stop_group(proc, ((signal.SIGINT, after_int), (signal.SIGTERM, after_term)))
        raise


def start_background(argv: Sequence[str], *, env: Mapping[str, str],
                     cwd: Path | None = None) -> subprocess.Popen[str]:
    """A helper that outlives this call (the runner's fork server), in its own process
    group as every child here, for the caller to stop with ``stop_group``. Its stdout is a
    text pipe the caller reads (a ready line); stdin is closed and stderr discarded. A
    program that cannot be started raises OSError, for the caller to word."""
    return subprocess.Popen(list(argv), env=dict(env), cwd=cwd, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)


class LineSink:
    """Where the child's lines go: the tail, the log file, the console.

    A failed log write is remembered (``error``) and the pipe is still drained, so the
    child never blocks on it; a failed console write only turns the echo off.
    """

    def __init__(self, log: TextIO, log_path: Path, echo: TextIO | None, prefix: str,
                 tail: collections.deque[str],
                 on_line: Callable[[str], None] | None = None) -> None:
        self.log, self.log_path, self.echo, self.prefix, self.tail = (
            log, log_path, echo, prefix, tail)
        self.on_line = on_line
        self.error = ""

    def pump(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        with proc.stdout:  # closed at EOF, not left to the garbage collector
            for raw in proc.stdout:
                self.line(raw.decode("utf-8", "replace").rstrip("\n"))

    def line(self, line: str) -> None:
        line = scrub(line)
        self.tail.append(line)
        self.note(line)
        if self.on_line is not None:
            self.on_line(line)
        if self.echo is not None:
            try:
                self.echo.write(f"{self.prefix}{line}\n")
                self.echo.flush()
            except (OSError, ValueError):
                self.echo = None  # the terminal is gone (SIGHUP) or the pipe closed

    def note(self, line: str) -> None:
        if self.error:
            return
        try:
            self.log.write(line + "\n")
            self.log.flush()
        except OSError as error:
            self.error = describe_write_failure(error, str(self.log_path))
