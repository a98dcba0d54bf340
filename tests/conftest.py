"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

pytest_plugins = ("pytester",)


import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from runs import Runs, make_runs  # noqa: E402


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Run folders written by real ``harness run`` runs (see tests/runs.py)."""
    return make_runs(tmp_path_factory.mktemp("real-runs"))
