"""An exclusive lock on a file beside what it guards (``fcntl.flock``), held across
processes on one host: two jobs on one CI agent share a cache, and the first build of
an environment or the first migration of a database must happen once.

The lock file is never removed (removing it would let a third process lock a new
inode while the second still holds the old one); the kernel drops the lock when its
holder exits, however it exits.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.errors import InfraError

POLL_S = 0.25


@contextmanager
def file_lock(path: Path, what: str, *, timeout_s: float = 3600.0,
              quiet: bool = False) -> Iterator[None]:
    """Hold ``path``'s lock; if another process holds it, say so once and wait."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not said and not quiet:
                    print(f"harness: waiting for another harness process ({what}; lock {path})",
                          file=sys.stderr)
                    said = True
                if time.monotonic() > deadline:
                    raise InfraError(f"{what}: still locked by another process after "
                                     f"{timeout_s:g} s (lock {path})") from None
                time.sleep(POLL_S)
        yield
    finally:
        os.close(fd)  # releases the lock
