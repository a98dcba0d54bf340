"""A tiny suite that the run-record tests drive through real ``harness run`` runs.

Named check_*.py so that ``pytest tests`` does not collect it. ``RECORD_MODE`` picks
the night: ``pass`` (everything passes or is expected), ``fail`` (one regression),
``crash`` (the interpreter dies half-way, after some results are written), ``hang``
(waits half-way, for a test that cancels the run).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

MODE = os.environ.get("RECORD_MODE", "pass")


def traced(func: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator defined here, so JUnit's file/classname point at this line's module."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    yield


def test_first_passes() -> None:
    assert sum(range(4)) == 6


@traced
def test_decorated(platform_dtype: str) -> None:
    assert platform_dtype


@_quiet()
def test_context_decorated() -> None:
    assert True


@pytest.mark.parametrize("shape", [(1, 8), (3, 5)])
def test_regresses(shape: tuple[int, int]) -> None:
    # The regression of the "fail" night: one parameter only.
    assert not (MODE == "fail" and shape == (3, 5)), "rms_norm drifted on [3, 5]"


@pytest.mark.parametrize("shape", [(2, 2)])
def test_known_now_passes(shape: tuple[int, int]) -> None:
    """A quarantined known failure (bracketed id in the matrix) that passes now."""
    assert shape == (2, 2)


def test_skipped_for_a_reason() -> None:
    pytest.skip("needs fp8_e4m3fnuz")


def test_crashes_half_way() -> None:
    if MODE == "crash":
        os.abort()
    if MODE == "hang":  # stopped from outside while it waits
        time.sleep(300)


class TestLater:
    def test_after_the_crash(self) -> None:
        assert True
