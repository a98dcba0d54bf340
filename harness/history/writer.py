"""Turn parsed cases into rows of the ``cases`` table, as plain tuples, fast.

Ingest spends most of its time here and in the XML parser, so the work per case is
split: ``prepare`` (in the parser's process, see ``parse_pool``) does everything that
needs no database ids, and ``Writer.insert_cases`` only adds the run, suite and test
ids and the infrastructure signature of failures. A row names only the columns it has
a value for, and goes to the INSERT statement of exactly those columns (a handful in
practice, each made once), because the sqlite3 module binds ``None`` slowly (it looks
for an adapter on every one: about 0.3 us each) and most cases have no message and no
properties.
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
_FLOATS = frozenset({"max_abs_err", "max_rel_err", "atol", "rtol", "headroom"})
_FAILED = frozenset({"failed", "error"})
BATCH = 4096  # rows per executemany
_BASE = "INSERT INTO cases (run, suite, test, status, duration, reruns"
Columns = tuple[str, ...]  # the optional columns a row has, in table order
# (suite, nodeid, key, params, columns, status, message, the row's values after the ids)
Prepared = tuple[str, str, str, str, Columns, str, str, tuple[Any, ...]]
_PLAIN: Columns = ()
_MESSAGE: Columns = ("message",)
# The property names of a case, in their order -> (its columns without and with a
# message, (name, is a float) per column, whether some go to ``extra``).
_Plan = tuple[Columns, Columns, tuple[tuple[str, bool], ...], bool]
_PLANS: dict[tuple[str, ...], _Plan] = {}


def _float(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _plan(names: tuple[str, ...]) -> _Plan:
    present = set(names)
    columns = tuple(c for c in COLUMN_PROPERTIES if c in present)
    extra = not present <= _COLUMNS
    tail: Columns = ("extra",) if extra else ()
    found = (
        columns + tail,
        _MESSAGE + columns + tail,
        tuple((c, c in _FLOATS) for c in columns),
        extra,
    )
    _PLANS[names] = found
    return found


def _with_properties(
    props: dict[str, str], head: tuple[Any, ...], message: bool
) -> tuple[Columns, tuple[Any, ...]]:
    plan = _PLANS.get(names := tuple(props)) or _plan(names)
    values = [_float(props[c]) if is_float else props[c] for c, is_float in plan[2]]
    columns = plan[1] if message else plan[0]
    if None in values:  # a number that is not one: that column stays NULL
        keep = [v is not None for v in values]
        columns = tuple(
            c for c, k in zip(columns, ([True] if message else []) + keep + [True] * plan[3],
                              strict=True) if k
        )
        values = [v for v in values if v is not None]
    if plan[3]:
        others = {k: v for k, v in props.items() if k not in _COLUMNS}
        values.append(json.dumps(others, sort_keys=True))
    return columns, (*head, *values)


def prepare(case: Case) -> Prepared:
    """Everything about one case's row that needs no database."""
    status = case.status
    message = case.message
    head: tuple[Any, ...] = (
        (status, case.duration, case.reruns, message)
        if message
        else (status, case.duration, case.reruns)
    )
    if case.properties:
        columns, tail = _with_properties(case.properties, head, bool(message))
    else:
        columns, tail = (_MESSAGE if message else _PLAIN), head
    return case.suite, case.nodeid, case.key, case.params, columns, status, message, tail


def _sql(columns: Columns) -> str:
    names = "".join(f", {c}" for c in columns)
    return f"{_BASE}{names}) VALUES (?,?,?,?,?,?{',?' * len(columns)})"


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
        self._statements: dict[Columns, str] = {}
        self._signed: dict[Columns, Columns] = {}

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
        groups: dict[Columns, list[tuple[Any, ...]]] = {}
        test_ids = self.test_ids
        signed = self._signed
        total = 0
        pending = 0
        for _, nodeid, key, params, columns, status, message, tail in cases:
            test = test_ids.get(nodeid) or self._new_test(nodeid, key, params)
            if status in _FAILED:
                signature = None
                if status == "error":
                    signature = infra.from_message(message) or suite_signature
                elif suite_signature:
                    signature = infra.from_message(message)
                if signature is not None:
                    columns = signed.get(columns) or self._sign(columns)
                    tail = (*tail, signature)
            rows = groups.get(columns)
            if rows is None:
                rows = groups[columns] = []
            rows.append((run_id, suite_id, test, *tail))
            pending += 1
            if pending >= BATCH:
                total += pending
                pending = 0
                self._flush(groups)
        self._flush(groups)
        return total + pending

    def _sign(self, columns: Columns) -> Columns:
        self._signed[columns] = found = (*columns, "infra_signature")
        return found

    def _flush(self, groups: dict[Columns, list[tuple[Any, ...]]]) -> None:
        for columns, rows in groups.items():
            if rows:
                sql = self._statements.get(columns)
                if sql is None:
                    sql = self._statements[columns] = _sql(columns)
                self.db.executemany(sql, rows)
                rows.clear()
