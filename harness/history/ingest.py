"""Ingest run folders and loose JUnit files into the history database, idempotently.

A run folder (``manifest.json`` + ``junit/*.xml``) is keyed by its ``run_id``; a loose
JUnit file by the sha256 of its bytes; ingesting either twice adds nothing. Each run
goes in as one transaction of ``executemany`` inserts, parsed as a stream.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.history import infra
from harness.history.schema import connect
from harness.results.junit_read import COLUMN_PROPERTIES, Case, JunitReader

Warn = Callable[[str], None]
_SHARD = re.compile(r"-shard-\d+-of-\d+$")
_NUMERIC = ("max_abs_err", "max_rel_err", "atol", "rtol", "headroom")


@dataclass
class IngestResult:
    added: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already in the database
    cases: int = 0
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Run:
    key: str
    source: Path
    junit: list[Path]
    manifest: dict[str, Any]
    matrix_json: str | None = None


def _utc(text: object) -> str | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _discover(paths: Sequence[Path], warn: Warn) -> Iterator[_Run]:
    for path in paths:
        if path.is_file():
            yield _Run(key=f"file:{_sha256(path)}", source=path, junit=[path], manifest={})
            continue
        if not path.is_dir():
            raise UsageError(f"{path}: no such run folder or JUnit file")
        folders = sorted({m.parent for m in path.rglob("manifest.json")})
        for folder in folders:
            run = _run_folder(folder, warn)
            if run is not None:
                yield run
        inside = set(folders)
        for xml in sorted(path.rglob("*.xml")):
            if inside.isdisjoint(xml.parents):
                yield _Run(key=f"file:{_sha256(xml)}", source=xml, junit=[xml], manifest={})


def _run_folder(folder: Path, warn: Warn) -> _Run | None:
    manifest_path = folder / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        warn(f"{manifest_path}: unreadable manifest ({error}); run skipped")
        return None
    if not isinstance(manifest, dict):
        warn(f"{manifest_path}: manifest is not a JSON object; run skipped")
        return None
    junit = sorted((folder / "junit").glob("*.xml"))
    if not junit and (folder / "merged.xml").is_file():
        junit = [folder / "merged.xml"]
    key = str(manifest.get("run_id") or f"manifest:{_sha256(manifest_path)}")
    matrix_file = folder / "matrix.json"
    matrix_json = matrix_file.read_text(encoding="utf-8") if matrix_file.is_file() else None
    return _Run(key=key, source=folder, junit=junit, manifest=manifest, matrix_json=matrix_json)


def _suite_name(junit: Path) -> str:
    return _SHARD.sub("", junit.stem)


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _float(value: str | None) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        return None


class _Writer:
    """Inserts one run; keeps the nodeid -> tests.id map across runs of one ingest."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.test_ids: dict[str, int] = dict(
            (nodeid, tid) for tid, nodeid in db.execute("SELECT id, nodeid FROM tests")
        )
        self.next_test = int(db.execute("SELECT coalesce(max(id), 0) FROM tests").fetchone()[0])

    def run_row(self, run: _Run, suite_props: dict[str, str], started: str | None) -> int:
        m = run.manifest
        matrix_info = _mapping(m.get("matrix"))
        matrix = str(
            matrix_info.get("name")
            or m.get("platform")
            or suite_props.get("matrix")
            or suite_props.get("platform")
            or "unknown"
        )
        emulate = bool(m.get("emulate", str(suite_props.get("emulate", "")).lower() == "true"))
        infra_error = m.get("infra_error") if isinstance(m.get("infra_error"), dict) else None
        infra_kind = str(infra_error.get("kind")) if infra_error else None
        infra_message = str(infra_error.get("message", "")) if infra_error else None
        signature = infra.classify(kind=infra_kind, message=infra_message) if infra_error else None
        git = _mapping(m.get("git"))
        cursor = self.db.execute(
            "INSERT INTO runs (run_key, matrix, lane, platform, family, emulate, fingerprint,"
            " image, git_sha, torch, started, ended, status, exit_code, infra_kind,"
            " infra_message, infra_signature, source, matrix_json, ingested)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                run.key,
                matrix,
                matrix + (" (emulated)" if emulate else ""),
                m.get("platform") or suite_props.get("platform") or matrix,
                m.get("family"),
                int(emulate),
                m.get("device_fingerprint") or suite_props.get("device_fingerprint"),
                m.get("image") or suite_props.get("image"),
                git.get("sha") or suite_props.get("git_sha"),
                m.get("torch") or suite_props.get("torch_version"),
                _utc(m.get("started"))
                or started
                or dt.datetime.fromtimestamp(run.source.stat().st_mtime, dt.UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                ),
                _utc(m.get("ended")),
                m.get("status"),
                m.get("exit_code"),
                infra_kind,
                infra_message,
                signature,
                str(run.source),
                run.matrix_json,
                dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            ),
        )
        return int(cursor.lastrowid or 0)

    def test_id(self, case: Case) -> int:
        tid = self.test_ids.get(case.nodeid)
        if tid is None:
            self.next_test += 1
            tid = self.test_ids[case.nodeid] = self.next_test
            self.db.execute(
                "INSERT INTO tests (id, nodeid, key, params) VALUES (?,?,?,?)",
                (tid, case.nodeid, case.key, case.params),
            )
        return tid

    def case_rows(
        self, run_id: int, suite_id: int, cases: Iterable[Case], suite_signature: str | None
    ) -> Iterator[tuple[Any, ...]]:
        for case in cases:
            props = case.properties
            signature = None
            if case.status == "error":
                signature = infra.from_message(case.message) or suite_signature
            elif case.status == "failed" and suite_signature:
                signature = infra.from_message(case.message)
            extra = {k: v for k, v in props.items() if k not in COLUMN_PROPERTIES}
            yield (
                run_id,
                suite_id,
                self.test_id(case),
                case.status,
                case.duration,
                case.message or None,
                case.reruns,
                signature,
                props.get("provider"),
                props.get("op"),
                props.get("dtype"),
                *(_float(props.get(name)) for name in _NUMERIC),
                props.get("requires"),
                json.dumps(extra, sort_keys=True) if extra else None,
            )


_CASE_INSERT = (
    "INSERT INTO cases (run, suite, test, status, duration, message, reruns, infra_signature,"
    " provider, op, dtype, max_abs_err, max_rel_err, atol, rtol, headroom, requires, extra)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


def _ingest_run(writer: _Writer, run: _Run, warn: Warn) -> int:
    db = writer.db
    outcomes = {
        str(o.get("suite")): o for o in run.manifest.get("suites", []) if isinstance(o, dict)
    }
    readers = [(path, JunitReader(path, warn)) for path in run.junit]
    # The first file's suite properties describe a loose run; read it lazily with the rest.
    first_cases: list[Case] = list(readers[0][1]) if readers else []
    first_props: dict[str, str] = {}
    started: str | None = None
    if readers:
        for suite in readers[0][1].suites.values():
            first_props.update(suite.properties)
            started = started or _utc(suite.timestamp)
    run_id = writer.run_row(run, first_props, started)
    suite_ids: dict[str, int] = {}
    total = 0

    def suite_id(name: str) -> int:
        if name not in suite_ids:
            outcome = outcomes.get(name, {})
            status = outcome.get("status")
            code = outcome.get("exit_code")
            reason = outcome.get("reason")
            signature = infra.classify(status=status, exit_code=code, message=reason)
            cursor = db.execute(
                "INSERT INTO suites (run, name, status, exit_code, duration, reason,"
                " infra_signature) VALUES (?,?,?,?,?,?,?)",
                (run_id, name, status, code, outcome.get("duration_s"), reason, signature),
            )
            suite_ids[name] = int(cursor.lastrowid or 0)
        return suite_ids[name]

    for index, (path, reader) in enumerate(readers):
        # In a run folder the file names the suite; a loose file uses its <testsuite> names.
        named = _suite_name(path) if run.manifest else None
        cases: Iterable[Case] = first_cases if index == 0 else reader
        signatures: dict[str, str | None] = {}
        rows: list[tuple[Any, ...]] = []
        for case in cases:
            name = named or case.suite
            sid = suite_id(name)
            if name not in signatures:
                signatures[name] = db.execute(
                    "SELECT infra_signature FROM suites WHERE id = ?", (sid,)
                ).fetchone()[0]
            rows.extend(writer.case_rows(run_id, sid, (case,), signatures[name]))
        db.executemany(_CASE_INSERT, rows)
        total += len(rows)
        props: dict[str, str] = {}
        for suite in reader.suites.values():
            props.update(suite.properties)
        if named is not None:
            sid = suite_id(named)
            db.execute(
                "UPDATE suites SET properties = ? WHERE id = ?",
                (json.dumps(props, sort_keys=True) if props else None, sid),
            )
    for name in outcomes:  # suites that ran but left no JUnit still count
        suite_id(name)
    return total


def ingest_paths(db_path: Path, paths: Sequence[Path], warn: Warn) -> IngestResult:
    result = IngestResult()

    def note(line: str) -> None:
        result.warnings.append(line)
        warn(line)

    db = connect(db_path)
    try:
        writer = _Writer(db)
        known = {row[0] for row in db.execute("SELECT run_key FROM runs")}
        for run in _discover(paths, note):
            if run.key in known:
                result.skipped.append(run.key)
                continue
            with db:
                result.cases += _ingest_run(writer, run, note)
            known.add(run.key)
            result.added.append(run.key)
    finally:
        db.close()
    return result
