"""What the nightly report reads of the history: the runs of its window and their suites
and cases, as typed rows; the SQL lives here, beside the schema it reads.

``WindowReader`` holds one read connection for the report's build; each method is one
query, named for the question the report asks, and answers rows (named tuples, or plain
typed tuples where a night yields one per test case and the report only folds them).
The report (``reports/``) turns the rows into its sections and runs no SQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from harness.history.schema import connect
from harness.results.case_meaning import NEW_FAILURES, WORKS, sql

# The outcomes the history counts (case_meaning.py): new failures against what worked;
# a known failure that holds (xfail) is neither.
_WORKS = sql(WORKS)
_NEW = sql(NEW_FAILURES)
_COUNTED = sql(WORKS | NEW_FAILURES)


def ids(values: Iterable[int]) -> str:
    """An ``IN (...)`` list of integer row ids (integers only, so nothing to escape)."""
    text = ",".join(str(int(v)) for v in values)
    return text or "NULL"


class RunRow(NamedTuple):
    """One run of the window."""

    id: int
    key: str
    lane: str
    matrix: str
    started: str
    status: str | None
    infra_label: str | None
    infra_message: str | None
    fingerprint: str | None  # the device fingerprint's JSON
    matrix_json: str | None
    shard: str | None  # "i/N"
    build: str | None


class NearTolerance(NamedTuple):
    """A kernel case whose error came close to its tolerance."""

    run: int
    key: str
    op: str | None
    dtype: str | None
    provider: str | None
    headroom: float
    max_abs_err: float | None
    atol: float | None


class SpeedPoint(NamedTuple):
    """A speed-tier case of one run: its ratio, or why it recorded none (results/speed.py)."""

    run: int
    key: str
    nodeid: str
    op: str | None
    provider: str | None
    dtype: str | None
    ratio: str | None
    skipped: str | None


class CaseOutcome(NamedTuple):
    test: int
    key: str
    status: str
    message: str | None


class FailingCase(NamedTuple):
    test: int
    run: int
    key: str
    message: str


class FlakeCount(NamedTuple):
    lane: str
    key: str
    runs: int
    bad: int
    flips: int
    rerun_passes: int


class InfraRow(NamedTuple):
    """A run, suite or case that failed for infrastructure; ``name``: the matrix, the
    suite or the test's key."""

    lane: str
    run_key: str
    started: str
    name: str
    label: str
    message: str | None


class SuiteCount(NamedTuple):
    """A suite of a run, with the count and time of its cases of one status (a suite
    without cases: one row, ``case_status`` None)."""

    run: int
    name: str
    status: str | None
    infra_label: str | None
    reason: str | None
    case_status: str | None
    cases: int
    duration: float
    peak_rss_mb: float | None = None  # the most a test process held among these cases


class Point(NamedTuple):
    lane: str
    started: str
    value: float


class OpPoint(NamedTuple):
    lane: str
    op: str
    started: str
    headroom: float


class FusionValue(NamedTuple):
    lane: str
    key: str
    started: str
    name: str  # "fusion.<metric>.<found|expected>"
    value: str | int | float | None


_RUNS = (
    "SELECT id, run_key, lane, matrix, started, status, infra_label, infra_message,"
    " fingerprint, matrix_json, shard, build FROM runs WHERE started >= ? AND started <= ?"
    " ORDER BY started, id"
)

_FLAKY = f"""
WITH seq AS (
    SELECT r.lane AS lane, c.test AS test, r.started AS started,
           c.status IN {_NEW} AS bad,
           (c.reruns > 0 AND c.status IN {_WORKS}) AS rerun_pass
    FROM cases c JOIN runs r ON r.id = c.run JOIN suites s ON s.id = c.suite
    WHERE c.run IN ({{window}}) AND r.infra_label IS NULL
      AND s.infra_label IS NULL AND c.infra_label IS NULL
      AND c.status IN {_COUNTED}
      -- Only tests that failed or were rerun at least once can be flaky.
      AND c.test IN (SELECT test FROM cases WHERE run IN ({{window}})
                     AND (status IN {_NEW} OR reruns > 0))
), marked AS (
    SELECT lane, test, bad, rerun_pass,
           bad != LAG(bad) OVER (PARTITION BY lane, test ORDER BY started) AS flip
    FROM seq
)
SELECT m.lane, t.key, count(*), sum(m.bad), sum(coalesce(m.flip, 0)), sum(m.rerun_pass)
FROM marked m JOIN tests t ON t.id = m.test
GROUP BY m.lane, m.test
HAVING sum(m.rerun_pass) > 0 OR sum(coalesce(m.flip, 0)) >= 2
"""


class WindowReader:
    """The report's reads over one open history database (``open_window``)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def runs(self, since: str, until: str) -> list[RunRow]:
        """The runs started in [since, until], oldest first."""
        return [RunRow(*row) for row in self._db.execute(_RUNS, (since, until))]

    def test_keys(self) -> dict[int, str]:
        """Every test's id -> its device-free key."""
        return dict(self._db.execute("SELECT id, key FROM tests"))

    # -- cases of a set of runs

    def exercised(self, runs: Collection[int]) -> Iterator[tuple[str, int, str]]:
        """(lane, test, requires) of the cases that ran and declare what they require."""
        return self._db.execute(
            "SELECT DISTINCT r.lane, c.test, c.requires FROM cases c JOIN runs r ON r.id = c.run"
            f" WHERE c.run IN ({ids(runs)}) AND c.requires IS NOT NULL"
            " AND c.status NOT IN ('skipped')"
        )

    def op_calls(self, runs: Collection[int]) -> list[tuple[int, str, str]]:
        """(run, test key, its op record: the ``ops`` property, plugin/ops.py) of the cases
        that called an op."""
        return [(run, key, ops) for run, key, ops in self._db.execute(
            "SELECT c.run, t.key, json_extract(c.extra, '$.ops') FROM cases c"
            f" JOIN tests t ON t.id = c.test WHERE c.run IN ({ids(runs)})"
            " AND json_valid(c.extra) AND json_extract(c.extra, '$.ops') IS NOT NULL")]

    def headroom(self, runs: Collection[int], at_least: float, limit: int) -> list[NearTolerance]:
        """The cases whose headroom (error / tolerance) is ``at_least``, worst first."""
        return [NearTolerance(run, key, op, dtype, provider, float(head), err, atol)
                for run, key, op, dtype, provider, head, err, atol in self._db.execute(
                    "SELECT c.run, t.key, c.op, c.dtype, c.provider, c.headroom, c.max_abs_err,"
                    " c.atol FROM cases c JOIN tests t ON t.id = c.test"
                    f" WHERE c.run IN ({ids(runs)})"
                    " AND c.headroom >= ? ORDER BY c.headroom DESC, t.key LIMIT ?",
                    (at_least, limit))]

    def ran_with_known_failure(self, tests: Collection[int],
                               runs: Collection[int]) -> list[tuple[int, str, bool]]:
        """(run, status, a known failure applied) of ``tests``' cases that ran in ``runs``."""
        return [(run, status, bool(applied)) for run, status, applied in self._db.execute(
            "SELECT run, status, json_extract(extra, '$.known_failure') IS NOT NULL FROM cases"
            f" WHERE test IN ({ids(tests)}) AND run IN ({ids(runs)}) AND status != 'skipped'"
        )]

    def night_cases(self, runs: Collection[int]) -> list[tuple[int, str, str, bool]]:
        """(test, node id, status, a known failure applied) of every case of ``runs``."""
        return [(test, nodeid, status, bool(applied))
                for test, nodeid, status, applied in self._db.execute(
                    "SELECT t.id, t.nodeid, c.status,"
                    " json_extract(c.extra, '$.known_failure') IS NOT NULL"
                    " FROM cases c JOIN tests t ON t.id = c.test"
                    f" WHERE c.run IN ({ids(runs)})")]

    def outcomes(self, runs: Collection[int]) -> list[CaseOutcome]:
        """Every case of ``runs`` but those an infrastructure failure decided."""
        return [CaseOutcome(*row) for row in self._db.execute(
            "SELECT c.test, t.key, c.status, c.message FROM cases c"
            f" JOIN tests t ON t.id = c.test WHERE c.run IN ({ids(runs)})"
            " AND c.infra_label IS NULL")]

    def failing(self, runs: Collection[int]) -> list[FailingCase]:
        """The failed and errored cases of ``runs`` (infrastructure failures left out)."""
        return [FailingCase(*row) for row in self._db.execute(
            "SELECT c.test, c.run, t.key, coalesce(c.message, '') FROM cases c"
            " JOIN tests t ON t.id = c.test"
            f" WHERE c.run IN ({ids(runs)}) AND c.status IN {_NEW}"
            " AND c.infra_label IS NULL")]

    def lanes_of_tests(self, runs: Collection[int]) -> Iterator[tuple[str, int]]:
        """(lane, test): where each test ran at least once in ``runs``."""
        return self._db.execute(
            "SELECT DISTINCT r.lane, c.test FROM cases c JOIN runs r ON r.id = c.run"
            f" WHERE c.run IN ({ids(runs)})")

    def cases(self, runs: Collection[int]) -> Iterator[tuple[int, int, str, str | None]]:
        """(run, test, status, message) of every case of ``runs``: a night's worth, read
        once and folded by the caller (hundreds of thousands of rows: plain tuples)."""
        return self._db.execute(
            f"SELECT run, test, status, message FROM cases WHERE run IN ({ids(runs)})")

    def suite_counts(self, runs: Collection[int]) -> list[SuiteCount]:
        """Every suite of ``runs`` with its cases counted and timed by status."""
        return [SuiteCount(run, name, status, sig, reason, case_status, int(count),
                           float(duration), None if peak is None else float(peak))
                for run, name, status, sig, reason, case_status, count, duration, peak
                in self._db.execute(
                    "SELECT s.run, s.name, s.status, s.infra_label, s.reason, c.status,"
                    " count(c.status), coalesce(sum(c.duration), 0),"
                    " max(CASE WHEN json_valid(c.extra) THEN"
                    " CAST(json_extract(c.extra, '$.peak_rss_mb') AS REAL) END) FROM suites s"
                    " LEFT JOIN cases c ON c.run = s.run AND c.suite = s.id"
                    f" WHERE s.run IN ({ids(runs)}) GROUP BY s.id, c.status")]

    # -- through the window, in time

    def flaky(self, window: Collection[int]) -> list[FlakeCount]:
        """Per lane and test: pass/fail flips and passes on rerun (infrastructure left
        out), for the tests with two or more flips or a pass on rerun."""
        given = ids(window)
        return [FlakeCount(*row) for row in self._db.execute(_FLAKY.format(window=given))]

    def infra(self, window: Collection[int], case_limit: int) -> list[tuple[str, InfraRow]]:
        """(scope, row) of every run and suite that failed for infrastructure, and of
        the newest ``case_limit`` such cases."""
        scope = f"IN ({ids(window)})"
        found = [("run", InfraRow(*row)) for row in self._db.execute(
            "SELECT lane, run_key, started, matrix, infra_label, infra_message FROM runs"
            f" WHERE id {scope} AND infra_label IS NOT NULL")]
        found += [("suite", InfraRow(*row)) for row in self._db.execute(
            "SELECT r.lane, r.run_key, r.started, s.name, s.infra_label, s.reason"
            f" FROM suites s JOIN runs r ON r.id = s.run WHERE s.run {scope}"
            " AND s.infra_label IS NOT NULL")]
        found += [("case", InfraRow(*row)) for row in self._db.execute(
            "SELECT r.lane, r.run_key, r.started, t.key, c.infra_label, c.message"
            " FROM cases c JOIN runs r ON r.id = c.run JOIN tests t ON t.id = c.test"
            f" WHERE c.run {scope} AND c.infra_label IS NOT NULL"
            " ORDER BY r.started DESC LIMIT ?", (case_limit,))]
        return found

    def op_headroom(self, window: Collection[int]) -> list[OpPoint]:
        """Per run and op, the worst headroom, oldest run first."""
        return [OpPoint(lane, op, started, float(headroom))
                for lane, op, started, headroom in self._db.execute(
                    "SELECT r.lane, c.op, r.started, max(c.headroom) FROM cases c"
                    f" JOIN runs r ON r.id = c.run WHERE c.run IN ({ids(window)})"
                    " AND c.op IS NOT NULL AND c.headroom IS NOT NULL"
                    " GROUP BY c.run, c.op ORDER BY r.started")]

    def pass_rates(self, window: Collection[int]) -> list[Point]:
        """Per run, oldest first: the share of its passing cases among passed and failed."""
        points = []
        for lane, started, good, bad in self._db.execute(
            f"SELECT r.lane, r.started, sum(c.status IN {_WORKS}),"
            f" sum(c.status IN {_NEW}) FROM runs r LEFT JOIN cases c ON c.run = r.id"
            f" WHERE r.id IN ({ids(window)}) GROUP BY r.id ORDER BY r.started"
        ):
            total = (good or 0) + (bad or 0)
            points.append(Point(lane, started, (good or 0) / total if total else 0.0))
        return points

    def speeds(self, window: Collection[int]) -> list[SpeedPoint]:
        """The speed tier's cases of the window's runs (a ratio or a reason), oldest first."""
        return [SpeedPoint(*row) for row in self._db.execute(
            "SELECT c.run, t.key, t.nodeid, c.op, c.provider, c.dtype,"
            " json_extract(c.extra, '$.speed_ratio'), json_extract(c.extra, '$.speed_skipped')"
            " FROM cases c JOIN runs r ON r.id = c.run JOIN tests t ON t.id = c.test"
            f" WHERE c.run IN ({ids(window)}) AND c.extra LIKE '%\"speed_%'"
            " AND json_valid(c.extra) ORDER BY r.started")]

    def fusion_values(self, window: Collection[int]) -> list[FusionValue]:
        """The ``fusion.*`` properties of the window's cases, oldest run first."""
        return [FusionValue(*row) for row in self._db.execute(
            "SELECT r.lane, t.key, r.started, j.key, j.value"
            " FROM cases c JOIN runs r ON r.id = c.run JOIN tests t ON t.id = c.test,"
            " json_each(c.extra) j"
            f" WHERE c.run IN ({ids(window)}) AND c.extra LIKE '%fusion.%'"
            " AND j.key LIKE 'fusion.%' ORDER BY r.started")]


@contextmanager
def open_window(path: Path) -> Iterator[WindowReader]:
    """A reader over the history at ``path``; ConfigError (one line) where there is none
    or it is not a history database."""
    db = connect(path, create=False)
    try:
        yield WindowReader(db)
    finally:
        db.close()
