"""Ingest run folders and loose JUnit files into the history database, idempotently.

A run folder (``manifest.json`` + ``junit/*.xml``) is keyed by its ``run_id``; a loose
JUnit file by the sha256 of its bytes; ingesting either twice adds nothing. One ingest
is one transaction (all of it or none), parsed as a stream. A bulk load (more new runs
than the database holds) drops the indexes on ``cases`` and builds them again at the
end, which sorts once instead of inserting a million times into a B-tree.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import InfraError, UsageError
from harness.history import infra
from harness.history.parse_pool import Parsed, parse_files
from harness.history.schema import connect
from harness.history.writer import Prepared, Writer

Warn = Callable[[str], None]
_SHARD = re.compile(r"-shard-\d+-of-\d+$")
_BULK_MIN_RUNS = 8
BUSY_TIMEOUT_S = 30.0  # how long to wait for another ingest's transaction


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


def _run_values(run: _Run, suite_props: dict[str, str], started: str | None) -> tuple[Any, ...]:
    """The ``runs`` row of one run (all but ``ingested``), from its manifest, else its JUnit."""
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
    return (
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
    )


def _ingest_run(writer: Writer, run: _Run, parsed: Iterator[Parsed]) -> int:
    outcomes = {
        str(o.get("suite")): o for o in run.manifest.get("suites", []) if isinstance(o, dict)
    }
    files = [next(parsed) for _ in run.junit]
    # The first file's suite properties describe a loose run; read it before the run row.
    first_cases: list[Prepared] = list(files[0].cases) if files else []
    first_props: dict[str, str] = {}
    started: str | None = None
    if files:
        for first in files[0].suites.values():
            first_props.update(first.properties)
            started = started or _utc(first.timestamp)
    run_id = writer.insert_run(_run_values(run, first_props, started))
    suites: dict[str, tuple[int, str | None]] = {}  # name -> (id, infra signature)
    total = 0

    def suite(name: str) -> tuple[int, str | None]:
        found = suites.get(name)
        if found is None:
            found = suites[name] = writer.insert_suite(run_id, name, outcomes.get(name, {}))
        return found

    for index, file in enumerate(files):
        cases = first_cases if index == 0 else file.cases
        if run.manifest:
            # In a run folder the file names the suite.
            sid, signature = suite(_suite_name(file.path))
            total += writer.insert_cases(run_id, sid, cases, signature)
            props: dict[str, str] = {}
            for found in file.suites.values():
                props.update(found.properties)
            writer.set_suite_properties(sid, props)
        else:
            # A loose file uses its <testsuite> names, which arrive together per suite.
            for name, group in itertools.groupby(cases, key=lambda row: row[0]):
                sid, signature = suite(name)
                total += writer.insert_cases(run_id, sid, group, signature)
    for name in outcomes:  # suites that ran but left no JUnit still count
        suite(name)
    return total


def _drop_case_indexes(db: sqlite3.Connection) -> list[str]:
    """Drop the indexes on ``cases``; return the statements that make them again."""
    rows = db.execute(
        "SELECT name, sql FROM sqlite_master"
        " WHERE type = 'index' AND tbl_name = 'cases' AND sql IS NOT NULL"
    ).fetchall()
    for name, _ in rows:
        db.execute(f'DROP INDEX "{name}"')
    return [sql for _, sql in rows]


def ingest_paths(
    db_path: Path, paths: Sequence[Path], warn: Warn, *, workers: int | None = None
) -> IngestResult:
    """Add the runs under ``paths`` not yet in the database, in one transaction.

    ``workers``: processes that parse JUnit (None: chosen by size; 0: in-process).
    """
    result = IngestResult()

    def note(line: str) -> None:
        result.warnings.append(line)
        warn(line)

    runs = list(_discover(paths, note))  # a bad path stops here, before any write
    db = connect(db_path)
    try:
        # The ids in a case row are the ones this transaction just wrote, so checking
        # three foreign keys per row buys nothing; the pragma only works outside it.
        db.execute("PRAGMA foreign_keys=OFF")
        db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        try:
            db.execute("BEGIN IMMEDIATE")  # the write lock first: then the keys hold
        except sqlite3.OperationalError as error:
            raise InfraError(f"{db_path}: history database is busy ({error})") from None
        try:
            known = {row[0] for row in db.execute("SELECT run_key FROM runs")}
            bulk_floor = max(_BULK_MIN_RUNS, len(known))
            new: list[_Run] = []
            for run in runs:
                if run.key in known:
                    result.skipped.append(run.key)
                else:
                    known.add(run.key)
                    new.append(run)
            indexes = _drop_case_indexes(db) if len(new) >= bulk_floor else []
            writer = Writer(db)
            parsed = parse_files([path for run in new for path in run.junit], note, workers)
            try:
                for run in new:
                    result.cases += _ingest_run(writer, run, parsed)
                    result.added.append(run.key)
            finally:
                parsed.close()  # stops the worker pool now, not when collected
            for sql in indexes:
                db.execute(sql)
            db.commit()
        except BaseException:
            db.rollback()
            raise
        db.execute("PRAGMA foreign_keys=ON")
    finally:
        db.close()
    return result
