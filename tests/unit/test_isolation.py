"""The guard in tests/conftest.py: every test's home, caches and history are the session's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.history.schema import default_db_path
from harness.matrix import load_matrix
from harness.platform.cache import cache_root


def test_home_caches_and_history_are_under_the_sessions_tmp(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    base = tmp_path_factory.getbasetemp()
    assert Path.home().is_relative_to(base)
    assert cache_root(load_matrix("cpu")).is_relative_to(base)
    assert Path(os.environ["XDG_CACHE_HOME"]).is_relative_to(base)
    assert default_db_path().is_relative_to(base)


def test_shared_cache_is_the_real_home_and_keeps_the_sessions_history(
    shared_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    base = tmp_path_factory.getbasetemp()
    assert cache_root(load_matrix("cpu")) == shared_cache
    assert not shared_cache.is_relative_to(base)
    assert default_db_path().is_relative_to(base)


def test_a_unit_test_gets_the_unit_folders_timeout_on_its_body(
    request: pytest.FixtureRequest,
) -> None:
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None
    assert (marker.args, marker.kwargs) == ((60,), {"func_only": True})
