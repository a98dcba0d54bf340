"""Every outcome a test can have, for tests/integration/test_junit_schema.py.

Named check_*.py so that ``pytest tests`` does not collect it. ``OUTCOMES_MODE`` picks
how the suite ends: ``all`` (every test runs), ``crash`` (the interpreter aborts in
``test_stops_the_suite``) or ``hang`` (it sleeps there until the step timeout).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

MODE = os.environ.get("OUTCOMES_MODE", "all")


@pytest.fixture
def broken_fixture() -> Iterator[None]:
    raise RuntimeError("the fixture cannot start")
    yield


@pytest.fixture
def broken_teardown() -> Iterator[None]:
    yield
    raise RuntimeError("the fixture cannot stop")


def test_passes(record_property: pytest.RecordProperty) -> None:
    record_property("op", "rms_norm")
    record_property("headroom", "0.25")
    assert True


def test_fails(record_property: pytest.RecordProperty) -> None:
    record_property("op", "linear")
    assert 1 + 1 == 3, "linear drifted"


def test_errors_in_setup(broken_fixture: None) -> None:
    assert True


def test_errors_in_teardown(broken_teardown: None) -> None:
    assert True


def test_skips() -> None:
    pytest.skip("needs fp8_e4m3fnuz")


@pytest.mark.xfail(reason="known drift", strict=True)
def test_expected_failure() -> None:
    raise AssertionError("drifted")


@pytest.mark.xfail(reason="was broken", strict=True)
def test_strict_xpass() -> None:
    assert True


@pytest.mark.parametrize("shape", [(1, 8), (3, 5)])
def test_stops_the_suite(shape: tuple[int, int]) -> None:
    if shape == (3, 5) and MODE == "crash":
        os.abort()
    if shape == (3, 5) and MODE == "hang":
        time.sleep(600)


class TestAfter:
    def test_never_runs_after_a_stop(self) -> None:
        assert True
