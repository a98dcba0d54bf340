"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from report_history import History, make_history
from runs import Runs, make_runs  # tests/ is on sys.path: this conftest's folder

pytest_plugins = ("pytester",)

# Triton reads this once, when it is first imported: every test here runs Triton on the
# CPU, so set it before any test module (in any xdist worker) can import triton.
os.environ.setdefault("TRITON_INTERPRET", "1")


def _once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Any]) -> Any:
    """Make a session's shared data once for all xdist workers (the first makes it, the
    others wait and reuse it); ``make`` returns something with ``as_dict``."""
    # Imported here: suites under tests/data (run in a matrix venv or an image without
    # filelock) load this conftest too.
    from filelock import FileLock

    base = factory.getbasetemp()
    # Under xdist the session's folder is the parent of each worker's; without it the
    # parent is shared by every session, so stay in this session's own folder.
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with FileLock(str(shared / f"{name}.lock")):
        folder = shared / name
        index = folder / "index.json"
        if not index.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            index.write_text(json.dumps(make(folder).as_dict()))
        return json.loads(index.read_text())


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Run folders written by real ``harness run`` runs (see tests/runs.py). Read-only:
    a test that changes files works on ``runs.copy_runs``."""
    return Runs.from_dict(_once(tmp_path_factory, "real-runs", make_runs))


@pytest.fixture(scope="session")
def nightly_history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """Seven lanes over three nights, every run folder written by ``harness run``
    (tests/report_history.py), for the report and browser tests. Read-only."""
    return History.from_dict(_once(tmp_path_factory, "nightly-history", make_history))
