"""A tiny suite for tests/integration/test_repro.py: one test fails on purpose.

Named check_*.py so that ``pytest tests`` does not collect it; the repro tests run it
through a matrix whose suite path names this file.
"""

from __future__ import annotations


def test_passes() -> None:
    assert sum(range(4)) == 6


def test_dtype(platform_dtype: str) -> None:
    # Fails for one dtype only, so a repro must keep the parameter id in the node id.
    assert platform_dtype != "float16", "float16 is the deliberate failure"


class TestGroup:
    def test_seeded(self, seed: int) -> None:
        assert seed >= 0
