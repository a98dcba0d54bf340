"""A suite that mostly skips on night 3 of the cpu lane (a feature probe that stopped finding
the feature), for the nightly-report tests; see check_kernels.py."""

from __future__ import annotations

import os

import pytest

NIGHT = int(os.environ.get("NIGHT", "1"))
LANE = os.environ.get("LANE", "cpu")


@pytest.mark.parametrize("feature", [f"feature{i}" for i in range(10)])
def test_feature(feature: str) -> None:
    if LANE == "cpu" and NIGHT == 3 and feature != "feature0":
        pytest.skip("the feature probe found no device")
