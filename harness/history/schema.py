"""The database schema, created and upgraded by ordered migrations.

``schema_version`` holds one row. Each migration moves the schema up by one, in its
own transaction, so a database written by an older harness opens in a newer one and
a newer database is refused rather than misread.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from harness.errors import ConfigError
from harness.filelock import file_lock

BUSY_TIMEOUT_S = 300.0


def _v1_tables(db: sqlite3.Connection) -> None:
    db.executescript(
        """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            run_key TEXT NOT NULL UNIQUE,   -- manifest run_id, or file:<sha256> for loose JUnit
            matrix TEXT NOT NULL,
            lane TEXT NOT NULL,             -- matrix, plus " (emulated)": runs compared together
            platform TEXT, family TEXT, emulate INTEGER NOT NULL DEFAULT 0,
            fingerprint TEXT, image TEXT, git_sha TEXT, torch TEXT,
            started TEXT NOT NULL,          -- ISO 8601 UTC, sortable as text
            ended TEXT, status TEXT, exit_code INTEGER,
            infra_kind TEXT, infra_message TEXT, infra_signature TEXT,
            source TEXT NOT NULL, matrix_json TEXT, ingested TEXT NOT NULL
        );
        CREATE TABLE suites (
            id INTEGER PRIMARY KEY,
            run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            status TEXT, exit_code INTEGER, duration REAL, reason TEXT,
            infra_signature TEXT, properties TEXT,
            UNIQUE (run, name)
        );
        -- One row per distinct normalised id, so the big table holds integers.
        CREATE TABLE tests (
            id INTEGER PRIMARY KEY,
            nodeid TEXT NOT NULL UNIQUE,    -- the plugin's normalisation (device kept)
            key TEXT NOT NULL,              -- device parts dropped: same test on every platform
            params TEXT NOT NULL DEFAULT ''
        );
        CREATE TABLE cases (
            run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            suite INTEGER NOT NULL REFERENCES suites(id) ON DELETE CASCADE,
            test INTEGER NOT NULL REFERENCES tests(id),
            status TEXT NOT NULL,
            duration REAL, message TEXT, reruns INTEGER NOT NULL DEFAULT 0,
            infra_signature TEXT,
            provider TEXT, op TEXT, dtype TEXT,
            max_abs_err REAL, max_rel_err REAL, atol REAL, rtol REAL, headroom REAL,
            requires TEXT,
            extra TEXT                      -- JSON of the other properties (fusion.*, ...)
        );
        """
    )


def _v2_indexes(db: sqlite3.Connection) -> None:
    db.executescript(
        """
        CREATE INDEX cases_by_run ON cases (run, suite);
        CREATE INDEX cases_by_test ON cases (test);
        CREATE INDEX runs_by_lane ON runs (lane, started);
        CREATE INDEX tests_by_key ON tests (key);
        """
    )


def _v3_shards(db: sqlite3.Connection) -> None:
    # The shards of one CI build are one night of a lane (the report joins them).
    db.executescript(
        """
        ALTER TABLE runs ADD COLUMN shard TEXT;   -- "i/N", or NULL for a whole run
        ALTER TABLE runs ADD COLUMN build TEXT;   -- the CI build id its shards share
        """
    )


def _v4_no_platform(db: sqlite3.Connection) -> None:
    # runs.platform always equalled runs.matrix, and nothing read it. An SQLite without
    # DROP COLUMN (before 3.35) keeps it, NULL from now on: nothing reads it there either.
    if sqlite3.sqlite_version_info >= (3, 35):
        db.execute("ALTER TABLE runs DROP COLUMN platform")


def _v5_infra_label(db: sqlite3.Connection) -> None:
    # "signature" keeps one meaning, a failure's fingerprint (results/run_folder.py): what
    # names an infrastructure failure (gpu-hang, oom-kill, ...) is its label.
    for table in ("runs", "suites", "cases"):
        db.execute(f"ALTER TABLE {table} RENAME COLUMN infra_signature TO infra_label")


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _v1_tables,
    _v2_indexes,
    _v3_shards,
    _v4_no_platform,
    _v5_infra_label,
)
SCHEMA_VERSION = len(MIGRATIONS)


def default_db_path(root: Path | None = None) -> Path:
    """``$HARNESS_HISTORY``, else ``reports/history.sqlite`` under the repository root."""
    env = os.environ.get("HARNESS_HISTORY")
    if env:
        return Path(env)
    if root is None:
        from harness.roots import project_root

        root = project_root()  # never site-packages: the user's project, else the cwd
    return root / "reports" / "history.sqlite"


def current_version(db: sqlite3.Connection) -> int:
    db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = db.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(db: sqlite3.Connection, path: Path | str = "<memory>") -> int:
    version = current_version(db)
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"history schema version {version} is newer than this harness knows "
            f"({SCHEMA_VERSION}); upgrade the harness",
            file=str(path),
        )
    for number in range(version, SCHEMA_VERSION):
        with db:
            MIGRATIONS[number](db)
            db.execute("DELETE FROM schema_version")
            db.execute("INSERT INTO schema_version (version) VALUES (?)", (number + 1,))
    return SCHEMA_VERSION


def _migration_lock(path: Path) -> AbstractContextManager[None]:
    lock = path.with_name(path.name + ".lock")
    try:
        os.close(os.open(lock, os.O_RDWR | os.O_CREAT, 0o644))
    except OSError:
        return nullcontext()  # a read-only folder: nothing there can be migrated anyway
    return file_lock(lock, f"migrating {path}", quiet=True)


def connect(path: Path, *, create: bool = True) -> sqlite3.Connection:
    """Open (and migrate) the history database; a missing file is created if asked."""
    if not create and not path.exists():
        raise ConfigError(
            "no history database here (run `harness history ingest` first)", file=str(path)
        )
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # Concurrent ingests wait for each other's write transactions instead of failing.
        db = sqlite3.connect(path, isolation_level="DEFERRED", timeout=BUSY_TIMEOUT_S)
        # One process at a time switches a new file to WAL and migrates it; the others
        # then find the schema at its version (the lock file lives beside the database).
        with _migration_lock(path):
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            migrate(db, path)
    except sqlite3.DatabaseError as error:
        raise ConfigError(f"not a usable history database ({error})", file=str(path)) from None
    return db
