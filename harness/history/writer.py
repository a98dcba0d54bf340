"""Insert runs, suites and cases into the history database.

Rows come ready from the parser (see ``rows``): the writer adds the database ids and,
for failed and error cases, the suite's say on their infrastructure label, then
runs one ``executemany`` per group of rows that share their columns. The run and suite
ids go into the statement as numbers, not as parameters bound on every row.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Callable, Iterable
from typing import cast

from harness.history import infra
from harness.history.rows import Batch, Columns, key_and_params
from harness.results.cause import CauseRecord
from harness.results.manifest import RunRecord
from harness.results.outcome import SuiteOutcome

_SIGNED: Columns = ("infra_label",)
# A suite's (id, infrastructure label) by its <testsuite> name.
SuiteOf = Callable[[str], tuple[int, "str | None"]]


_RUN_COLUMN_NAMES = (
    "run_key", "matrix", "lane", "family", "emulate", "fingerprint", "image",
    "git_sha", "torch", "started", "ended", "status", "exit_code", "infra_kind",
    "infra_message", "infra_label", "source", "matrix_json", "shard", "build",
)  # fmt: skip
_RUN_COLUMNS = ", ".join(_RUN_COLUMN_NAMES)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _run_row(record: RunRecord, source: str, matrix_json: str | None) -> tuple[object, ...]:
    """The ``runs`` columns of a record, in ``_RUN_COLUMN_NAMES`` order."""
    failure = record.infra_error
    # A run skipped on a host that is not its matrix's failed nothing: no label.
    label = None
    if failure and record.status != "skipped":
        # A run's infrastructure failure always has a name: its kind where its cause
        # (a pytest error, a failed write) names none.
        label = (
            infra.run_label(failure.cause, failure.kind, gpu=record.on_gpu)
            if failure.cause
            else infra.guess_label(kind=failure.kind, message=failure.message)
        )
    fingerprint = record.device_fingerprint
    return (
        record.run_id, record.matrix.name, str(record.lane), record.family or None,
        int(record.emulate),
        json.dumps(fingerprint.to_json(), sort_keys=True) if fingerprint else None,
        record.image, record.git.sha, record.torch, record.started, record.ended,
        record.status or None, record.exit_code, failure.kind if failure else None,
        failure.message if failure else None, label, source, matrix_json,
        record.shard, record.build,
    )  # fmt: skip


class Writer:
    """Inserts runs, suites and cases; keeps the nodeid -> tests.id map across runs."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.test_ids: dict[str, int] = {
            nodeid: tid for tid, nodeid in db.execute("SELECT id, nodeid FROM tests")
        }
        self.next_test = max(self.test_ids.values(), default=0)
        self._added: list[str] = []
        self._names: dict[Columns, str] = {}  # ", message, op, ..." per column set

    def mark(self) -> int:
        """Where a run's new tests start (see :meth:`forget_since`)."""
        return len(self._added)

    def forget_since(self, mark: int) -> None:
        """Drop the tests added since ``mark`` from the cache: their rows were rolled back."""
        for nodeid in self._added[mark:]:
            del self.test_ids[nodeid]
        del self._added[mark:]
        self.next_test = max(self.test_ids.values(), default=0)

    def insert_run(self, record: RunRecord, *, source: str, matrix_json: str | None) -> int:
        """Insert a run's row: a run folder's manifest record, or the record ingest
        makes for a loose JUnit file (its ``run_id`` the file's key, no status)."""
        cursor = self.db.execute(
            f"INSERT INTO runs ({_RUN_COLUMNS}, ingested)"
            f" VALUES ({', '.join('?' * (len(_RUN_COLUMN_NAMES) + 1))})",
            (*_run_row(record, source, matrix_json), _now()),
        )
        return int(cursor.lastrowid or 0)

    def update_run(
        self, run_id: int, record: RunRecord, *, source: str, matrix_json: str | None
    ) -> None:
        """Rewrite a run's row (all but ``ingested``) once its first file is read."""
        self.db.execute(
            f"UPDATE runs SET ({_RUN_COLUMNS}) = ({', '.join('?' * len(_RUN_COLUMN_NAMES))})"
            " WHERE id = ?",
            (*_run_row(record, source, matrix_json), run_id),
        )

    def insert_suite(
        self, run_id: int, name: str, outcome: SuiteOutcome | None, *, gpu: bool
    ) -> tuple[int, str | None]:
        """Insert one suite row (``outcome`` None: a suite the manifest does not name;
        ``gpu``: its run ran on a GPU); return its id and its infrastructure label."""
        if outcome is None:
            status, code, duration, reason = None, None, None, None
        else:
            status, code = outcome.status.value, outcome.exit_code
            duration, reason = outcome.duration_s, outcome.reason
        label = (
            infra.label_of(outcome.cause, gpu=gpu)
            if outcome is not None and outcome.cause
            else infra.guess_label(status=status, exit_code=code, message=reason, gpu=gpu)
        )
        cursor = self.db.execute(
            "INSERT INTO suites (run, name, status, exit_code, duration, reason,"
            " infra_label) VALUES (?,?,?,?,?,?,?)",
            (run_id, name, status, code, duration, reason, label),
        )
        return int(cursor.lastrowid or 0), label

    def set_suite_properties(self, suite_id: int, props: dict[str, str]) -> None:
        self.db.execute(
            "UPDATE suites SET properties = ? WHERE id = ?",
            (json.dumps(props, sort_keys=True) if props else None, suite_id),
        )

    def _new_test(
        self, nodeid: str, new: dict[str, tuple[str, str]], fresh: list[tuple[object, ...]]
    ) -> int:
        self.next_test += 1
        tid = self.test_ids[nodeid] = self.next_test
        self._added.append(nodeid)
        fresh.append((tid, nodeid, *key_and_params(nodeid, new)))
        return tid

    def insert_cases(self, run_id: int, batches: Iterable[Batch], suite_of: SuiteOf) -> int:
        """Insert the rows of one file's batches; return how many. ``suite_of`` names
        the suite of a <testsuite> name (a run folder's file names one for all)."""
        total = 0
        for groups, new in batches:
            fresh: list[tuple[object, ...]] = []
            tests = [self._test_ids(nodeids, new, fresh) for nodeids, _ in groups.values()]
            if fresh:  # before their cases (no foreign key points ahead)
                self.db.executemany(
                    "INSERT INTO tests (id, nodeid, key, params) VALUES (?,?,?,?)", fresh
                )
            for (suite, columns, judged), (_, rows), ids in zip(
                groups, groups.values(), tests, strict=True
            ):
                suite_id, label = suite_of(suite)
                if judged:
                    with_tests = zip(rows, ids, strict=True)
                    self._insert_judged(run_id, suite_id, columns, with_tests, label)
                else:
                    # Each row gets its test id last, by C loops: (row) + (id,).
                    with_ids = map(tuple.__add__, rows, zip(ids))
                    self.db.executemany(self._sql(run_id, suite_id, columns), with_ids)
                total += len(rows)
        return total

    def _test_ids(
        self, nodeids: list[str], new: dict[str, tuple[str, str]], fresh: list[tuple[object, ...]]
    ) -> list[int]:
        ids = list(map(self.test_ids.get, nodeids))
        if None in ids:  # a test this database has not seen (or seen twice in this batch)
            for index, nodeid in enumerate(nodeids):
                if ids[index] is None:
                    ids[index] = self.test_ids.get(nodeid) or self._new_test(nodeid, new, fresh)
        return cast(list[int], ids)

    def _insert_judged(
        self,
        run_id: int,
        suite_id: int,
        columns: Columns,
        rows: Iterable[tuple[tuple[object, ...], int]],
        suite_label: str | None,
    ) -> None:
        """Failed and error rows: a case the harness wrote has its suite's label (the
        suite's recorded cause, which knows the GPU and the container), else its own
        cause's; an error keeps its message's label, else the suite's; a failure
        keeps its message's only in a suite that has one."""
        plain, signed = [], []
        for row, test in rows:
            found = row[-1]
            if isinstance(found, CauseRecord):
                found = suite_label or infra.label_of(found, gpu=False)
            elif row[0] == "error":
                found = found or suite_label
            elif not suite_label:
                found = None
            if found is None:
                plain.append((*row[:-1], test))
            else:
                signed.append((*row[:-1], found, test))
        if plain:
            self.db.executemany(self._sql(run_id, suite_id, columns), plain)
        if signed:
            self.db.executemany(self._sql(run_id, suite_id, columns + _SIGNED), signed)

    def _sql(self, run_id: int, suite_id: int, columns: Columns) -> str:
        names = self._names.get(columns)
        if names is None:
            names = self._names[columns] = "".join(f", {c}" for c in columns)
        # The ids are ints this database gave (never text from a file): written into the
        # statement, they are not bound on every row. sqlite3 caches compiled statements.
        return (
            f"INSERT INTO cases (run, suite, status, duration, reruns{names}, test)"
            f" VALUES ({int(run_id)}, {int(suite_id)}, ?, ?, ?{', ?' * len(columns)}, ?)"
        )
