"""harness.history.read: the history's rows for progress and shard planning, on loose JUnit
files ingested for real (run folders written by `harness run` are
tests/integration/test_progress.py and test_shard_durations.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.history import ingest_paths
from harness.history.read import CaseTime, recent_case_times, recent_suite_times
from harness.results.junit_read import read_junit
from harness.results.layout import Lane

DATA = Path(__file__).resolve().parents[1] / "data" / "junit"


def test_case_times_are_the_cases_ingested(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    files = [DATA / "gtest.xml", DATA / "pytest_xunit2.xml"]
    ingest_paths(db, files, pytest.fail)
    cases = [case for path in files for case in read_junit(path, pytest.fail)[0]]
    # a loose file has no lane of its own
    want = [CaseTime(lane="unknown", nodeid=c.nodeid, key=c.key, status=c.status,
                     seconds=c.duration) for c in cases]
    got = recent_case_times(db)
    assert len(want) > 4 and sorted(got, key=repr) == sorted(want, key=repr)
    newest = recent_case_times(db, last_runs=1)  # one file's cases: the lane's last run
    assert 0 < len(newest) < len(got) and set(newest) < set(got)


def test_without_a_readable_database(tmp_path: Path) -> None:
    missing, damaged = tmp_path / "missing.sqlite", tmp_path / "damaged.sqlite"
    damaged.write_text("not a database")
    # progress estimates never fail a run ...
    cpu = Lane(matrix="cpu")
    assert recent_suite_times(missing, cpu) == recent_suite_times(damaged, cpu) == []
    # ... shard durations say what is wrong, in one line
    with pytest.raises(ConfigError, match=r"missing\.sqlite: no history database"):
        recent_case_times(missing)
    with pytest.raises(ConfigError, match=r"damaged\.sqlite: not a usable history database"):
        recent_case_times(damaged)
