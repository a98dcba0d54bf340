"""Reading the history back for the rooms that plan from it: typed rows, never SQL.

``harness run`` estimates the time left from this lane's recent suite durations
(``run/progress.py``) and chooses each suite's workers from its tests' recent peak memory
(``run/memory.py``), and shard planning takes each test's recent durations
(``shard/durations.py``); they ask here, so the queries live beside the schema they
read. The nightly report's queries are its own (``reports/``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.history.schema import connect
from harness.results.layout import Lane


@dataclass(frozen=True, slots=True)
class SuiteTime:
    """One finished suite (passed or failed) of a run, and how long it took."""

    suite: str
    seconds: float


@dataclass(frozen=True, slots=True)
class CaseTime:
    """One timed test case of a lane's recent run."""

    lane: str
    nodeid: str
    key: str  # the device-free key: what a test is called on every lane
    status: str
    seconds: float


_SUITE_TIMES = """
    SELECT s.name, s.duration FROM suites s JOIN runs r ON r.id = s.run
    WHERE r.lane = ? AND s.duration IS NOT NULL AND s.status IN ('passed', 'failed')
    ORDER BY r.started DESC LIMIT ?
"""


def recent_suite_times(db: Path, lane: Lane, *, limit: int = 200) -> list[SuiteTime]:
    """This lane's newest finished suites that have a duration, newest first.

    Read-only and brief (a run in progress must not wait on an ingest, nor migrate the
    file): no database, a busy one or a damaged one gives no rows.
    """
    return [SuiteTime(suite=name, seconds=float(seconds))
            for name, seconds in _read_only(db, _SUITE_TIMES, (str(lane), limit))]


# A suite's whole runs: those of an unsharded run, and those a shard ran whole (the
# ingest marks them, history/ingest.py); a shard's part of a suite is not its time.
_WHOLE_SUITE_TIMES = """
    SELECT s.name, s.duration FROM suites s JOIN runs r ON r.id = s.run
    WHERE r.lane = ? AND s.duration IS NOT NULL AND s.status IN ('passed', 'failed')
      AND (r.shard IS NULL OR (json_valid(s.properties)
                               AND json_extract(s.properties, '$.whole_suite') = 'true'))
    ORDER BY r.started DESC LIMIT ?
"""


def recent_whole_suite_times(db: Path, lane: Lane, *, limit: int = 2000) -> list[SuiteTime]:
    """As ``recent_suite_times``, the suites that ran whole only (shard/durations.py)."""
    return [SuiteTime(suite=name, seconds=float(seconds))
            for name, seconds in _read_only(db, _WHOLE_SUITE_TIMES, (str(lane), limit))]


def _read_only(db: Path, query: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
    """The rows of one query, read-only and brief: no database, a busy one or a damaged
    one gives none (a run in progress must not wait on an ingest, nor migrate the file)."""
    if not db.is_file():
        return []
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return conn.execute(query, params).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []


@dataclass(frozen=True, slots=True)
class SuitePeak:
    """The most resident memory one test process of a suite held in the lane's recent runs,
    and the test it held it in (the ``peak_rss_mb`` property, plugin/memory.py)."""

    suite: str
    mb: float
    nodeid: str


# SQLite gives the bare columns of the row max() chose: the test that peaked.
_SUITE_PEAKS = """
WITH recent AS (
    SELECT id FROM runs WHERE lane = ? ORDER BY started DESC LIMIT ?
)
SELECT s.name, max(CAST(json_extract(c.extra, '$.peak_rss_mb') AS REAL)), t.nodeid
FROM cases c JOIN recent ON c.run = recent.id JOIN suites s ON s.id = c.suite
JOIN tests t ON t.id = c.test
WHERE json_valid(c.extra) AND json_extract(c.extra, '$.peak_rss_mb') IS NOT NULL
GROUP BY s.name
"""


def recent_suite_peaks(db: Path, lane: Lane, *, last_runs: int = 5) -> list[SuitePeak]:
    """Each suite's peak test memory over this lane's last runs; read-only and brief, as
    ``recent_suite_times`` (no database, a busy or a damaged one: no rows)."""
    return [SuitePeak(suite=name, mb=float(mb), nodeid=str(nodeid))
            for name, mb, nodeid in _read_only(db, _SUITE_PEAKS, (str(lane), last_runs))
            if mb is not None]


@dataclass(frozen=True, slots=True)
class CaseGrowth:
    """The most a test took its process's resident memory above where it started, over the
    lane's recent runs (the ``rss_growth_mb`` property, plugin/memory.py)."""

    suite: str
    nodeid: str
    mb: float


_TEST_GROWTH = """
WITH recent AS (
    SELECT id FROM runs WHERE lane = ? ORDER BY started DESC LIMIT ?
)
SELECT s.name, t.nodeid, max(CAST(json_extract(c.extra, '$.rss_growth_mb') AS REAL))
FROM cases c JOIN recent ON c.run = recent.id JOIN suites s ON s.id = c.suite
JOIN tests t ON t.id = c.test
WHERE json_valid(c.extra) AND json_extract(c.extra, '$.rss_growth_mb') IS NOT NULL
GROUP BY s.name, t.nodeid
"""


def recent_test_growth(db: Path, lane: Lane, *, last_runs: int = 5) -> list[CaseGrowth]:
    """Each test's growth over this lane's last runs, read as ``recent_suite_peaks``."""
    return [CaseGrowth(suite=str(name), nodeid=str(nodeid), mb=float(mb))
            for name, nodeid, mb in _read_only(db, _TEST_GROWTH, (str(lane), last_runs))
            if mb is not None]


@dataclass(frozen=True, slots=True)
class WorkerNeed:
    """What a fresh worker of a suite needs for its heaviest test, over the lane's recent
    runs: the least a test process held when one of its tests started (``peak_rss_mb`` less
    ``rss_growth_mb``, a growth below the 10 MB the plugin records taken as none: a fresh
    process's first test always records its peak), and the largest growth of any of its
    tests."""

    suite: str
    start_mb: float
    heaviest_mb: float

    @property
    def mb(self) -> float:
        return self.start_mb + self.heaviest_mb


_WORKER_NEEDS = """
WITH recent AS (
    SELECT id FROM runs WHERE lane = ? ORDER BY started DESC LIMIT ?
), grown AS (
    SELECT s.name AS suite,
           CAST(json_extract(c.extra, '$.rss_growth_mb') AS REAL) AS growth,
           CAST(json_extract(c.extra, '$.peak_rss_mb') AS REAL) AS peak
    FROM cases c JOIN recent ON c.run = recent.id JOIN suites s ON s.id = c.suite
    WHERE json_valid(c.extra) AND (json_extract(c.extra, '$.rss_growth_mb') IS NOT NULL
                                   OR json_extract(c.extra, '$.peak_rss_mb') IS NOT NULL)
)
SELECT suite, min(peak - coalesce(growth, 0)), max(growth) FROM grown GROUP BY suite
"""


def recent_worker_needs(db: Path, lane: Lane, *, last_runs: int = 5) -> list[WorkerNeed]:
    """Each suite's :class:`WorkerNeed` over this lane's last runs, read as
    ``recent_suite_peaks``; none for a suite whose cases never had both figures."""
    return [WorkerNeed(suite=str(name), start_mb=float(start), heaviest_mb=float(heaviest))
            for name, start, heaviest in _read_only(db, _WORKER_NEEDS, (str(lane), last_runs))
            if start is not None and heaviest is not None]


# The last runs of every lane, newest first; a case an infrastructure failure cut short
# (timeout, crash) says nothing of how long the test takes.
_CASE_TIMES = """
WITH recent AS (
    SELECT id, lane, row_number() OVER (PARTITION BY lane ORDER BY started DESC) AS age
    FROM runs
)
SELECT recent.lane, tests.nodeid, tests.key, cases.status, cases.duration
FROM cases JOIN recent ON cases.run = recent.id JOIN tests ON tests.id = cases.test
WHERE recent.age <= ? AND cases.duration IS NOT NULL AND cases.infra_label IS NULL
"""


def recent_case_times(db: Path, *, last_runs: int = 10) -> list[CaseTime]:
    """The timed cases of each lane's last ``last_runs`` runs, every lane.

    Raises ConfigError (one line, naming the file) where there is no database or it
    cannot be read.
    """
    conn = connect(db, create=False)
    try:
        rows = conn.execute(_CASE_TIMES, (last_runs,)).fetchall()
    except sqlite3.DatabaseError as error:
        raise ConfigError(f"cannot read durations from history ({error})", file=str(db)) from None
    finally:
        conn.close()
    return [CaseTime(lane=lane, nodeid=nodeid, key=key, status=status, seconds=float(seconds))
            for lane, nodeid, key, status, seconds in rows]


@dataclass(frozen=True, slots=True)
class OpTests:
    """Which tests called each op over a lane's recent runs (their op record), and what the
    newest of those runs installed."""

    runs: int  # the lane's recent runs that hold an op record
    requirements: tuple[str, ...]  # the newest such run's Python requirements
    tests: dict[str, frozenset[str]]  # op ("_C::rms_norm") -> node ids


_RECORDED_RUNS = """
SELECT r.id, r.matrix_json FROM runs r WHERE r.lane = ? AND EXISTS (
    SELECT 1 FROM cases c WHERE c.run = r.id AND json_valid(c.extra)
    AND json_extract(c.extra, '$.ops') IS NOT NULL)
ORDER BY r.started DESC LIMIT ?
"""

_OP_RECORDS = """
SELECT t.nodeid, json_extract(c.extra, '$.ops') FROM cases c JOIN tests t ON t.id = c.test
WHERE c.run IN (SELECT value FROM json_each(?)) AND json_valid(c.extra)
AND json_extract(c.extra, '$.ops') IS NOT NULL
"""


def recent_op_tests(db: Path, lane: Lane, *, last_runs: int = 5) -> OpTests:
    """The op record of this lane's last ``last_runs`` runs that kept one, read as
    ``recent_suite_times`` (none at all: ``runs`` is 0)."""
    import json

    from harness.results import op_record

    runs = _read_only(db, _RECORDED_RUNS, (str(lane), last_runs))
    if not runs:
        return OpTests(runs=0, requirements=(), tests={})
    requirements: tuple[str, ...] = ()
    try:
        python = (json.loads(runs[0][1] or "{}") or {}).get("python") or {}
        requirements = tuple(str(r) for r in python.get("requirements") or ())
    except (ValueError, AttributeError):
        pass
    tests: dict[str, set[str]] = {}
    for nodeid, ops in _read_only(db, _OP_RECORDS, (json.dumps([r[0] for r in runs]),)):
        for op in op_record.parse(str(ops)):
            tests.setdefault(op, set()).add(str(nodeid))
    return OpTests(runs=len(runs), requirements=requirements,
                   tests={op: frozenset(ids) for op, ids in tests.items()})
