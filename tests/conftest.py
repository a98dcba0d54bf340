"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

import pytest
from runs import Runs, make_runs  # tests/ is on sys.path: this conftest's folder

pytest_plugins = ("pytester",)


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Run folders written by real ``harness run`` runs (see tests/runs.py)."""
    return make_runs(tmp_path_factory.mktemp("real-runs"))
