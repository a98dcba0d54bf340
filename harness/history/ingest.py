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
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.errors import HarnessError, InfraError, UsageError
from harness.history import infra
from harness.history.parse_pool import Parsed, parse_files
from harness.history.rows import Batch
from harness.history.schema import connect
from harness.history.writer import Writer
from harness.results import layout
from harness.results.layout import Lane
from harness.results.manifest import MatrixRef, RunRecord
from harness.results.outcome import Status, SuiteOutcome

Warn = Callable[[str], None]
_BULK_MIN_RUNS = 8
BUSY_TIMEOUT_S = 30.0  # how long to wait for another ingest's transaction


@dataclass
class IngestResult:
    added: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already in the database
    cases: int = 0
    warnings: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # could not be stored


@dataclass
class _Run:
    key: str
    source: Path
    junit: list[Path]
    record: RunRecord | None = None  # None: a loose JUnit file
    lane: Lane | None = None  # --lane for loose files
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
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _discover(paths: Sequence[Path], warn: Warn, lane: Lane | None) -> Iterator[_Run]:
    for path in paths:
        if path.is_file():
            yield _Run(key=f"file:{_sha256(path)}", source=path, junit=[path], lane=lane)
            continue
        if not path.is_dir():
            raise UsageError(f"{path}: no such run folder or JUnit file")
        folders = layout.run_folders(path)
        for folder in folders:
            run = _run_folder(folder, warn)
            if run is not None:
                yield run
        inside = set(folders)
        for xml in sorted(path.rglob("*.xml")):
            if inside.isdisjoint(xml.parents):
                yield _Run(key=f"file:{_sha256(xml)}", source=xml, junit=[xml], lane=lane)


def _run_folder(folder: Path, warn: Warn) -> _Run | None:
    try:
        record = RunRecord.read(folder)
    except HarnessError as error:
        warn(f"{error}; run skipped")
        return None
    matrix_file = folder / layout.MATRIX
    matrix_json = matrix_file.read_text(encoding="utf-8") if matrix_file.is_file() else None
    return _Run(key=record.run_id, source=folder, junit=layout.junit_files(folder),
                record=record, matrix_json=matrix_json)


def _run_record(run: _Run, suite_props: dict[str, str], started: str | None) -> RunRecord:
    """The record of one run's ``runs`` row: a run folder's manifest, its times in UTC;
    a loose file's from ``--lane`` or the suite properties the plugin wrote."""
    fallback = dt.datetime.fromtimestamp(run.source.stat().st_mtime, dt.UTC)
    when = fallback.strftime("%Y-%m-%dT%H:%M:%SZ")
    rec = run.record
    if rec is None:
        lane = run.lane or Lane(
            matrix=suite_props.get("matrix") or suite_props.get("platform") or "unknown",
            emulated=suite_props.get("emulate", "").lower() == "true",
        )
        return RunRecord(run_id=run.key, matrix=MatrixRef(name=lane.matrix), emulate=lane.emulated,
                         status="", torch=suite_props.get("torch_version"),
                         started=started or when)
    return replace(
        rec,
        torch=rec.torch or suite_props.get("torch_version"),
        started=_utc(rec.started) or started or when,
        ended=_utc(rec.ended),
    )


def _not_junit(writer: Writer, run_id: int, file: Parsed, warn: Warn) -> None:
    """A file with no <testsuite> at all (an HTML error page, an empty file) is an
    infrastructure failure of its lane, not a run of 0 cases."""
    message = f"{file.path.name} is not JUnit (no <testsuite> element)"
    warn(f"{file.path}: not JUnit; recorded as an infrastructure failure")
    writer.db.execute(
        "UPDATE runs SET status = 'error', infra_kind = 'no-junit', infra_message = ?,"
        " infra_label = ? WHERE id = ?",
        (message, infra.guess_label(kind="no-junit", message=message), run_id),
    )


def _not_junit_outcome(name: str, known: SuiteOutcome | None) -> SuiteOutcome:
    """A suite whose file is not JUnit: what the manifest knew, its status no-junit."""
    if known is None:
        return SuiteOutcome(suite=name, status=Status.NO_JUNIT, exit_code=None, duration_s=0.0,
                            reason="not JUnit")
    return replace(known, status=Status.NO_JUNIT, reason="not JUnit")


def _first_file_facts(files: list[Parsed]) -> tuple[dict[str, str], str | None]:
    """The suite properties and start time of a run's first file, as far as read."""
    props: dict[str, str] = {}
    started: str | None = None
    if files:
        for first in files[0].suites.values():
            props.update(first.properties)
            started = started or _utc(first.timestamp)
    return props, started


def _ingest_run(writer: Writer, run: _Run, files: list[Parsed], warn: Warn) -> int:
    rec = run.record
    outcomes = {s.suite: s for s in rec.suites} if rec else {}
    # The first file's suite properties describe a loose run (and fill in a run
    # folder's torch version and start); they are complete once that file is read, so
    # the run row is written now (the cases need its id) and corrected then: no file
    # is ever held whole.
    source = str(run.source)
    values = _run_record(run, *_first_file_facts(files))
    run_id = writer.insert_run(values, source=source, matrix_json=run.matrix_json)
    suites: dict[str, tuple[int, str | None]] = {}  # name -> (id, infrastructure label)
    total = 0

    def suite(name: str, not_junit: bool = False) -> tuple[int, str | None]:
        found = suites.get(name)
        if found is None:
            outcome = outcomes.get(name)
            if not_junit:
                outcome = _not_junit_outcome(name, outcome)
            found = suites[name] = writer.insert_suite(run_id, name, outcome,
                                                       gpu=values.on_gpu)
        return found

    for index, file in enumerate(files):
        total += _ingest_file(writer, run, run_id, file, suite, warn)
        if index == 0 and (final := _run_record(run, *_first_file_facts(files))) != values:
            writer.update_run(run_id, final, source=source, matrix_json=run.matrix_json)
    for name in outcomes:  # suites that ran but left no JUnit still count
        suite(name)
    return total


def _ingest_file(
    writer: Writer,
    run: _Run,
    run_id: int,
    file: Parsed,
    suite: Callable[..., tuple[int, str | None]],
    warn: Warn,
) -> int:
    stream = iter(file.batches)
    head = next(stream, None)  # an empty stream is exhausted: file.suites is final
    if head is None and not file.suites:
        _not_junit(writer, run_id, file, warn)
        suite(layout.suite_of(file.path)[0] if run.record else file.path.stem, True)
        return 0
    batches: Iterable[Batch] = () if head is None else itertools.chain([head], stream)
    if run.record is None:
        # A loose file uses its <testsuite> names.
        return writer.insert_cases(run_id, batches, suite)
    # In a run folder the file names the suite.
    name, shard = layout.suite_of(file.path)
    named = suite(name)
    total = writer.insert_cases(run_id, batches, lambda _: named)
    props: dict[str, str] = {}
    for found in file.suites.values():
        props.update(found.properties)
    if run.record.shard and shard is None:
        props["whole_suite"] = "true"  # a shard ran it whole (shard/suites.py): its time
    writer.set_suite_properties(named[0], props)
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
    db_path: Path,
    paths: Sequence[Path],
    warn: Warn,
    *,
    workers: int | None = None,
    lane: Lane | None = None,
) -> IngestResult:
    """Add the runs under ``paths`` not yet in the database.

    Each run lands whole or not at all (a savepoint per run): a run that cannot be
    stored is one warning naming it, and the others still land. ``workers``: processes
    that parse JUnit (None: chosen by size; 0: in-process). ``lane``: the lane of loose
    JUnit files from other producers (else their suite properties, else ``unknown``).
    """
    result = IngestResult()

    def note(line: str) -> None:
        result.warnings.append(line)
        warn(line)

    runs = list(_discover(paths, note, lane))  # a bad path stops here, before any write
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
                    files = [next(parsed) for _ in run.junit]
                    if _ingest_one(writer, run, files, note, result):
                        result.added.append(run.key)
                    else:
                        result.failed.append(run.key)
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


def _ingest_one(
    writer: Writer, run: _Run, files: list[Parsed], warn: Warn, result: IngestResult
) -> bool:
    writer.db.execute("SAVEPOINT one_run")
    mark = writer.mark()
    try:
        result.cases += _ingest_run(writer, run, files, warn)
    except (sqlite3.Error, ValueError, TypeError, OverflowError) as error:
        writer.db.execute("ROLLBACK TO one_run")
        writer.db.execute("RELEASE one_run")
        writer.forget_since(mark)
        for file in files:  # the rest of its stream, so the next run's files line up
            for _ in file.batches:
                pass
        warn(f"{run.source}: not ingested ({type(error).__name__}: {error}); the others were")
        return False
    writer.db.execute("RELEASE one_run")
    return True
