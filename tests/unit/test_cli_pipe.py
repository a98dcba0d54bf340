"""`harness ... | head`: a reader that goes away ends the command quietly, as SIGPIPE ends
a shell tool (exit 141), never with a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.roots import project_root


def test_a_closed_pipe_is_exit_141_without_a_traceback() -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        done = subprocess.run([sys.executable, "-m", "harness", "matrix", "list"],
                              stdout=write, stderr=subprocess.PIPE, text=True,
                              cwd=project_root(), timeout=60, check=False)
    finally:
        os.close(write)
    assert done.returncode == 141, done.stderr
    assert done.stderr == ""
