"""Every external command of a run goes through here.

The child gets its own process group, so a timeout or Ctrl-C stops the whole tree
(pytest and its xdist workers) with named, bounded steps: interrupt, terminate, kill.
Output is streamed line by line with a prefix, and kept in a log file and a tail.
"""

from __future__ import annotations

import collections
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

INTERRUPT_TIMEOUT_S = 10.0
TERMINATE_TIMEOUT_S = 5.0
TAIL_LINES = 40


@dataclass(kw_only=True)
class ProcResult:
    exit_code: int | None
    duration_s: float
    timed_out: bool = False
    interrupted: bool = False
    tail: list[str] = field(default_factory=list)


def _stop(proc: subprocess.Popen[bytes], first: signal.Signals, grace: float) -> None:
    """Send ``first`` to the group, then SIGTERM, then SIGKILL, each with a bound."""
    for sig, wait in (
        (first, grace),
        (signal.SIGTERM, TERMINATE_TIMEOUT_S),
        (signal.SIGKILL, TERMINATE_TIMEOUT_S),
    ):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_streaming(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log_path: Path,
    prefix: str,
    timeout_s: float,
    cwd: Path | None = None,
    echo: TextIO | None = sys.stdout,
) -> ProcResult:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    start = time.monotonic()
    with log_path.open("a", encoding="utf-8") as log:
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

        def pump() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                tail.append(line)
                log.write(line + "\n")
                log.flush()
                if echo is not None:
                    echo.write(f"{prefix}{line}\n")
                    echo.flush()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        timed_out = interrupted = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop(proc, signal.SIGTERM, TERMINATE_TIMEOUT_S)
        except KeyboardInterrupt:
            interrupted = True
            _stop(proc, signal.SIGINT, INTERRUPT_TIMEOUT_S)
        reader.join(timeout=5)
        if timed_out:
            log.write(f"harness: killed after {timeout_s:g} s (step timeout)\n")
    return ProcResult(
        exit_code=proc.returncode,
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        interrupted=interrupted,
        tail=list(tail),
    )
