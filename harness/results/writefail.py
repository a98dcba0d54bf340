"""Writes that fail for good (a full disk, a read-only or forbidden folder) end a run as
an infrastructure error with one line, not a traceback or a hang.

A run folder keeps a small reserve file from the start: when the disk fills, it is
released so the manifest, the salvaged JUnit and merged.xml can still be written.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import TextIO

WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT, errno.EPERM})
RESERVE_NAME = ".harness-reserve"
RESERVE_BYTES = 256 * 1024


def is_write_failure(error: BaseException) -> bool:
    """An OSError a retry will not fix, or SQLite saying the same in its own words."""
    if isinstance(error, OSError):
        return error.errno in WRITE_ERRNOS
    if type(error).__module__ == "sqlite3" and type(error).__name__ == "OperationalError":
        text = str(error).lower()
        return "disk is full" in text or "readonly" in text or "read-only" in text
    return False


def describe(error: BaseException, what: str = "") -> str:
    """``cannot write PATH: No space left on device (ENOSPC)``, one line."""
    if isinstance(error, OSError):
        target = error.filename or what or "a file in the run folder"
        name = errno.errorcode.get(error.errno or 0, "")
        reason = error.strerror or str(error)
        return f"cannot write {target}: {reason}" + (f" ({name})" if name else "")
    return f"cannot write {what or 'the database'}: {error}"


def make_reserve(run_dir: Path) -> None:
    """Best effort: a run on an already full disk fails at its first real write."""
    try:
        with (run_dir / RESERVE_NAME).open("wb") as handle:
            handle.write(b"\0" * RESERVE_BYTES)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError:
        release_reserve(run_dir)


def release_reserve(run_dir: Path) -> None:
    with contextlib.suppress(OSError):
        (run_dir / RESERVE_NAME).unlink()


class QuietClose:
    """Close a log at the end; a flush that fails there was already reported."""

    def __init__(self, handle: TextIO) -> None:
        self.handle = handle

    def __enter__(self) -> TextIO:
        return self.handle

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self.handle.close()
