"""Turn parsed cases into rows of the ``cases`` table, as plain tuples, fast.

Ingest spends most of its time here and in the XML parser, so the per-case path
is kept short: ids come from dictionaries kept across the runs of one ingest, and
each row goes to the narrowest of three INSERT statements that holds it. The
narrow ones matter because the sqlite3 module binds ``None`` slowly (it looks for
an adapter on every ``None``), and most cases have no message and no properties.
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
_BARE = "INSERT INTO cases (run, suite, test, status, duration, reruns) VALUES (?,?,?,?,?,?)"
_PLAIN = (
    "INSERT INTO cases (run, suite, test, status, duration, reruns, message, infra_signature)"
    " VALUES (?,?,?,?,?,?,?,?)"
)
_FULL = (
    "INSERT INTO cases (run, suite, test, status, duration, reruns, message, infra_signature,"
    " provider, op, dtype, max_abs_err, max_rel_err, atol, rtol, headroom, requires, extra)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


def _float(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return None


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

    def insert_run(self, values: tuple[Any, ...]) -> int:
        cursor = self.db.execute(
            "INSERT INTO runs (run_key, matrix, lane, platform, family, emulate, fingerprint,"
            " image, git_sha, torch, started, ended, status, exit_code, infra_kind,"
            " infra_message, infra_signature, source, matrix_json, ingested)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*values, _now()),
        )
        return int(cursor.lastrowid or 0)

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

    def _new_test(self, case: Case) -> int:
        self.next_test += 1
        tid = self.test_ids[case.nodeid] = self.next_test
        self.db.execute(
            "INSERT INTO tests (id, nodeid, key, params) VALUES (?,?,?,?)",
            (tid, case.nodeid, case.key, case.params),
        )
        return tid

    def insert_cases(
        self, run_id: int, suite_id: int, cases: Iterable[Case], suite_signature: str | None
    ) -> int:
        """Insert the cases of one suite; return how many."""
        bare: list[tuple[Any, ...]] = []
        plain: list[tuple[Any, ...]] = []
        full: list[tuple[Any, ...]] = []
        test_ids = self.test_ids
        for case in cases:
            status = case.status
            signature = None
            if status == "error":
                signature = infra.from_message(case.message) or suite_signature
            elif status == "failed" and suite_signature:
                signature = infra.from_message(case.message)
            tid = test_ids.get(case.nodeid) or self._new_test(case)
            props = case.properties
            message = case.message or None
            if props:
                get = props.get
                extra = None
                if not props.keys() <= _COLUMNS:
                    extra = json.dumps(
                        {k: v for k, v in props.items() if k not in _COLUMNS}, sort_keys=True
                    )
                full.append(
                    (
                        run_id, suite_id, tid, status, case.duration, case.reruns,
                        message, signature, get("provider"), get("op"), get("dtype"),
                        _float(get("max_abs_err")), _float(get("max_rel_err")),
                        _float(get("atol")), _float(get("rtol")), _float(get("headroom")),
                        get("requires"), extra,
                    )
                )  # fmt: skip
            elif message is None and signature is None:
                bare.append((run_id, suite_id, tid, status, case.duration, case.reruns))
            else:
                plain.append(
                    (run_id, suite_id, tid, status, case.duration, case.reruns, message, signature)
                )
        for sql, rows in ((_BARE, bare), (_PLAIN, plain), (_FULL, full)):
            if rows:
                self.db.executemany(sql, rows)
        return len(bare) + len(plain) + len(full)
