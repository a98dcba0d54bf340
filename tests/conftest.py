"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from filelock import FileLock
from report_history import History, make_history
from runs import Runs, make_runs  # tests/ is on sys.path: this conftest's folder

pytest_plugins = ("pytester",)


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Run folders written by real ``harness run`` runs (see tests/runs.py), made once
    for all xdist workers (the first one makes them, the others wait and reuse them).
    Read-only: a test that changes files works on ``runs.copy_runs``."""
    shared = tmp_path_factory.getbasetemp().parent
    with FileLock(str(shared / "real-runs.lock")):
        folder = shared / "real-runs"
        index = folder / "runs.json"
        if not index.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            index.write_text(json.dumps(make_runs(folder).as_dict()))
        return Runs.from_dict(json.loads(index.read_text()))


@pytest.fixture(scope="session")
def nightly_history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """Seven lanes over three nights, every run folder written by ``harness run``
    (tests/report_history.py), for the report and browser tests; made once for all xdist
    workers like ``real_runs``. Read-only."""
    base = tmp_path_factory.getbasetemp()
    # Under xdist the session's folder is the parent of each worker's; without it the
    # parent is shared by every session, so stay in this session's own folder.
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with FileLock(str(shared / "nightly-history.lock")):
        folder = shared / "nightly-history"
        index = folder / "history.json"
        if not index.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            index.write_text(json.dumps(make_history(folder).as_dict()))
        return History.from_dict(json.loads(index.read_text()))
