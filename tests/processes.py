"""Whether a process the tests started is still there, read from /proc."""

from __future__ import annotations

import time
from pathlib import Path


def running(pid: int) -> bool:
    """Running: a zombie (exited, not yet reaped by its parent) counts as ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def reaped(pid: int) -> bool:
    """Gone from the process table: exited and reaped by its parent."""
    return not Path(f"/proc/{pid}").exists()


def ended_within(pid: int, seconds: float, *, reap: bool = False) -> bool:
    """Whether ``pid`` ends within ``seconds``; with ``reap``, only once its parent reaped
    it (a grandchild is init's, which in a container may never reap it: ask that of a
    process's own parent only)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (reaped(pid) if reap else not running(pid)):
            return True
        time.sleep(0.05)
    return False
