"""A small suite whose outcomes depend on the night and the lane, for the nightly-report tests.

Named check_*.py so that ``pytest tests`` does not collect it; tests/integration/report_history.py
runs it through user matrices whose ``runtime.env`` sets NIGHT (1 to 3) and LANE. On the ``cpu``
lane: ``test_regresses_tonight`` fails on night 3 (with a message full of Markdown and HTML
that must not pass through raw), ``test_fixed_tonight`` passes from night 3 on, ``test_flips``
fails on night 2 only (flaky), ``test_keeps_failing`` always fails (a streak), and
``test_fixed_upstream`` (a known failure in the matrix) passes on night 3. ``test_crashes``
kills the interpreter on the lane and night CRASH names: an infrastructure failure mid-suite.
"""

from __future__ import annotations

import os
import signal

import pytest

NIGHT = int(os.environ.get("NIGHT", "1"))
LANE = os.environ.get("LANE", "cpu")
FOCUS = LANE == "cpu"

HOSTILE = (
    "output drifted <img src=x onerror=alert(1)> see [the log](http://example.invalid/x) "
    "cc @org/kernels-team `code` | pipe *bold*"
)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", ["m1-k4096-n4096", "m128-k4096-n14336"])
def test_linear(shape: str, dtype: str, record_property: pytest.RecordProperty) -> None:
    record_property("op", "linear")
    record_property("headroom", 0.2 + 0.1 * NIGHT if dtype == "float32" else 0.9)
    assert shape and dtype


def test_regresses_tonight() -> None:
    assert not (FOCUS and NIGHT == 3), HOSTILE


def test_fixed_tonight() -> None:
    assert not (FOCUS and NIGHT < 3), "wrong provider selected"


def test_flips() -> None:
    assert not (FOCUS and NIGHT == 2), "race in the allocator"


def test_keeps_failing() -> None:
    assert not FOCUS, "rotary embedding off by one position"


def test_fixed_upstream() -> None:
    # A known failure on cpu (quarantined in the matrix); it starts passing on night 3.
    assert not (FOCUS and NIGHT < 3), "upstream bug in the allocator"


def test_crashes() -> None:
    if os.environ.get("CRASH") == f"{LANE}:{NIGHT}":
        os.kill(os.getpid(), signal.SIGKILL)
