"""A tiny suite run on two "nights" for ``harness report compare`` (tests/integration/
test_compare_runs.py). Named check_*.py so that ``pytest tests`` does not collect it.
``COMPARE_NIGHT`` is ``a`` or ``b``; what differs between them is what the compare must
find, and the matrix of night b lists other known failures."""

from __future__ import annotations

import os
from typing import Any

NIGHT = os.environ.get("COMPARE_NIGHT", "a")


def test_headroom_drifts(tolerance: Any, record_numerics: Any) -> None:
    import torch

    tol = tolerance("float32")
    expected = torch.zeros(8)
    share = 0.2 if NIGHT == "a" else 0.6  # passes both nights, three times nearer the limit
    record_numerics(expected + share * tol.atol, expected, tol, op="rms_norm", dtype="float32")


def test_headroom_holds(tolerance: Any, record_numerics: Any) -> None:
    import torch

    tol = tolerance("float32")
    expected = torch.zeros(8)
    share = 0.5 if NIGHT == "a" else 0.52  # moved by less than the report's 10%
    record_numerics(expected + share * tol.atol, expected, tol, op="rms_norm", dtype="float32")


def test_regresses() -> None:
    assert NIGHT == "a", "rms_norm drifted by 3 ulp on night b"


def test_raises_otherwise() -> None:
    if NIGHT == "a":
        raise ValueError("width 12 rejected")
    raise TypeError("bfloat16 unsupported")


def test_same_failure_other_values() -> None:
    raise ValueError(f"max abs err {0.5 if NIGHT == 'a' else 0.75} over 0.01")


def test_becomes_known() -> None:
    raise RuntimeError("kernel reads strided rows as packed")


def test_fixed_on_b() -> None:
    assert NIGHT == "b", "int8 saturates without VNNI"


if NIGHT == "b":

    def test_new_on_b() -> None:
        assert True
