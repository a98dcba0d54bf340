"""A tiny suite for the hardening tests (tests/integration/test_hardening.py and
tests/docker/test_hardening_docker.py); ``HARNESS_HARDENING`` picks what it does:

- ``wait``: two tests pass, then one writes its pid to ``HARNESS_HARDENING_MARKER``
  and sleeps (the test sends the signal once the marker is there);
- ``secret``: prints ``HF_TOKEN`` and fails with it in the message;
- ``flood``: prints about 40 MB and fails, so pytest shows it all (through the log).

Named check_*.py so that ``pytest tests`` does not collect it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

MODE = os.environ.get("HARNESS_HARDENING", "")


def test_first() -> None:
    assert sum(range(4)) == 6


def test_second() -> None:
    assert "abc".upper() == "ABC"


@pytest.mark.skipif(MODE != "wait", reason="wait mode only")
def test_waits_for_the_signal() -> None:
    marker = Path(os.environ["HARNESS_HARDENING_MARKER"])
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(str(os.getpid()))
    tmp.replace(marker)
    time.sleep(600)


@pytest.mark.skipif(MODE != "secret", reason="secret mode only")
def test_prints_the_secret() -> None:
    token = os.environ["HF_TOKEN"]
    print(f"the token is {token}")
    sys.stderr.write(f"stderr token {token}\n")
    assert token == "", f"token leaked: {token}"


@pytest.mark.skipif(MODE != "flood", reason="flood mode only")
def test_floods_the_log() -> None:
    # pytest captures a test's output and shows it when the test fails: into the log.
    line = "x" * 1000
    for i in range(40_000):
        print(f"{i} {line}")
    raise AssertionError("flooded")
