"""refengine loads on every torch it supports; elsewhere the suite says why it cannot run."""

from __future__ import annotations

import importlib

import pytest
from engine_support import too_old


@pytest.mark.tier("smoke")
def test_engine_loads() -> None:
    why = too_old()
    if why:
        pytest.skip(why)
    ops = importlib.import_module("refengine.ops")
    assert "rms_norm" in ops.OP_NAMES
