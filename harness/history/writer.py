"""Turn parsed cases into rows of the ``cases`` table, as plain tuples, fast.

Ingest spends most of its time here and in the XML parser, so the work per case is
split: ``prepare`` (in the parser's process, see ``parse_pool``) does everything that
needs no database ids, and ``Writer.insert_cases`` only adds the run, suite and test
ids and the infrastructure signature of failures. Each row goes to the narrowest of
three INSERT statements that holds it, because the sqlite3 module binds ``None``
slowly (it looks for an adapter on every one) and most cases have no message and no
properties. ``infra_signature`` comes last in the statements so it can be appended.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from harness.history import infra
from harness.results.junit_read import COLUMN_PROPERTIES, Case

_COLUMNS = frozenset(COLUMN_PROPERTIES)
_FAILED = frozenset({"failed", "error"})
BARE, PLAIN, FULL = 0, 1, 2
BATCH = 4096  # rows per executemany
_INSERTS = (
    "INSERT INTO cases (run, suite, test, status, duration, reruns) VALUES (?,?,?,?,?,?)",
    "INSERT INTO cases (run, suite, test, status, duration, reruns, message, infra_signature)"
    " VALUES (?,?,?,?,?,?,?,?)",
    "INSERT INTO cases (run, suite, test, status, duration, reruns, message, provider, op,"
    " dtype, max_abs_err, max_rel_err, atol, rtol, headroom, requires, extra, infra_signature)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
)
# (suite, nodeid, key, params, kind, status, message, the row's values after the ids)
Prepared = tuple[str, str, str, str, int, str, str, tuple[Any, ...]]


def _float(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def prepare(case: Case) -> Prepared:
    """Everything about one case's row that needs no database."""
    props = case.properties
    status = case.status
    message = case.message
    if props:
        get = props.get
        extra = None
        if not props.keys() <= _COLUMNS:
            others = {k: v for k, v in props.items() if k not in _COLUMNS}
            extra = json.dumps(others, sort_keys=True)
        tail: tuple[Any, ...] = (
            status, case.duration, case.reruns, message or None,
            get("provider"), get("op"), get("dtype"),
            _float(get("max_abs_err")), _float(get("max_rel_err")),
            _float(get("atol")), _float(get("rtol")), _float(get("headroom")),
            get("requires"), extra,
        )  # fmt: skip
        kind = FULL
    elif message or status in _FAILED:
        tail, kind = (status, case.duration, case.reruns, message or None), PLAIN
    else:
        tail, kind = (status, case.duration, case.reruns), BARE
    return case.suite, case.nodeid, case.key, case.params, kind, status, message, tail


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Writer:
    """Inserts runs, suites and cases; keeps the nodeid -> tests.id map across runs."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.test_ids: dict[str, int] = {
            nodeid: tid for tid, nodeid in db.execute("SELECT id, nodeid FROM tests")
        }
        self.next_test = max(self.test_ids.values(), default=0)
        self._added: list[str] = []

    def mark(self) -> int:
        """Where a run's new tests start (see :meth:`forget_since`)."""
        return len(self._added)

    def forget_since(self, mark: int) -> None:
        """Drop the tests added since ``mark`` from the cache: their rows were rolled back."""
        for nodeid in self._added[mark:]:
            del self.test_ids[nodeid]
        del self._added[mark:]
        self.next_test = max(self.test_ids.values(), default=0)

    def insert_run(self, values: tuple[Any, ...]) -> int:
        cursor = self.db.execute(
            "INSERT INTO runs (run_key, matrix, lane, platform, family, emulate, fingerprint,"
            " image, git_sha, torch, started, ended, status, exit_code, infra_kind,"
            " infra_message, infra_signature, source, matrix_json, shard, build, ingested)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*values, _now()),
        )
        return int(cursor.lastrowid or 0)

    def update_run(self, run_id: int, values: tuple[Any, ...]) -> None:
        """Rewrite a run's row (all but ``ingested``) once its first file is read."""
        self.db.execute(
            "UPDATE runs SET (run_key, matrix, lane, platform, family, emulate, fingerprint,"
            " image, git_sha, torch, started, ended, status, exit_code, infra_kind,"
            " infra_message, infra_signature, source, matrix_json, shard, build)"
            " = (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) WHERE id = ?",
            (*values, run_id),
        )

    def insert_suite(
        self, run_id: int, name: str, outcome: dict[str, Any]
    ) -> tuple[int, str | None]:
        """Insert one suite row; return its id and its infrastructure signature."""
        status = outcome.get("status")
        code = outcome.get("exit_code")
        reason = outcome.get("reason")
        signature = infra.classify(status=status, exit_code=code, message=reason)
        cursor = self.db.execute(
            "INSERT INTO suites (run, name, status, exit_code, duration, reason,"
            " infra_signature) VALUES (?,?,?,?,?,?,?)",
            (run_id, name, status, code, outcome.get("duration_s"), reason, signature),
        )
        return int(cursor.lastrowid or 0), signature

    def set_suite_properties(self, suite_id: int, props: dict[str, str]) -> None:
        self.db.execute(
            "UPDATE suites SET properties = ? WHERE id = ?",
            (json.dumps(props, sort_keys=True) if props else None, suite_id),
        )

    def _new_test(self, nodeid: str, key: str, params: str) -> int:
        self.next_test += 1
        tid = self.test_ids[nodeid] = self.next_test
        self._added.append(nodeid)
        self.db.execute(
            "INSERT INTO tests (id, nodeid, key, params) VALUES (?,?,?,?)",
            (tid, nodeid, key, params),
        )
        return tid

    def insert_cases(
        self, run_id: int, suite_id: int, cases: Iterable[Prepared], suite_signature: str | None
    ) -> int:
        """Insert the prepared cases of one suite; return how many. Rows go to the
        database in batches of ``BATCH``: memory is bounded per case, not per suite."""
        groups: tuple[list[tuple[Any, ...]], ...] = ([], [], [])
        bare = groups[BARE]
        test_ids = self.test_ids
        executemany = self.db.executemany
        ids: tuple[int, int, int]
        total = 0
        pending = 0
        for _, nodeid, key, params, kind, status, message, tail in cases:
            ids = (run_id, suite_id, test_ids.get(nodeid) or self._new_test(nodeid, key, params))
            if kind == BARE:
                bare.append(ids + tail)
            else:
                signature = None
                if status == "error":
                    signature = infra.from_message(message) or suite_signature
                elif status == "failed" and suite_signature:
                    signature = infra.from_message(message)
                groups[kind].append((*ids, *tail, signature))
            pending += 1
            if pending >= BATCH:
                total += pending
                pending = 0
                for sql, rows in zip(_INSERTS, groups, strict=True):
                    if rows:
                        executemany(sql, rows)
                        rows.clear()
        for sql, rows in zip(_INSERTS, groups, strict=True):
            if rows:
                executemany(sql, rows)
        return total + pending
