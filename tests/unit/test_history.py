"""History store: migrations, idempotent ingest, infra signatures, CLI."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from harness import cli
from harness.errors import ConfigError, InfraError
from harness.history import SCHEMA_VERSION, connect, ingest_paths, parse_pool
from harness.history import ingest as ingest_mod
from harness.history import schema as schema_mod
from harness.history.infra import classify

DATA = Path(__file__).resolve().parents[1] / "data" / "junit"


def test_fresh_database_is_at_the_latest_version(tmp_path: Path) -> None:
    db = connect(tmp_path / "h.sqlite")
    assert schema_mod.current_version(db) == SCHEMA_VERSION
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"cases_by_run", "cases_by_test"} <= names


def test_old_database_is_migrated_in_order(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    raw = sqlite3.connect(path)
    schema_mod.current_version(raw)
    schema_mod.MIGRATIONS[0](raw)
    raw.execute("INSERT INTO schema_version VALUES (1)")
    raw.commit()
    raw.close()
    db = connect(path)
    assert schema_mod.current_version(db) == SCHEMA_VERSION
    assert db.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 1


def test_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    connect(path).execute("UPDATE schema_version SET version = 99").connection.commit()
    with pytest.raises(ConfigError, match="newer than this harness"):
        connect(path)


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_text("this is not sqlite" * 100)
    with pytest.raises(ConfigError, match=r"junk\.sqlite"):
        connect(path)


@pytest.mark.parametrize(
    ("kwargs", "signature"),
    [
        ({"status": "crashed", "exit_code": 134}, "gpu-hang"),
        ({"status": "crashed", "exit_code": 137}, "oom-kill"),
        ({"status": "timeout", "exit_code": None}, "timeout"),
        ({"status": "no-junit", "exit_code": 0}, "missing-junit"),
        ({"kind": "image", "message": "manifest unknown"}, "image"),
        ({"kind": "docker"}, "docker"),
        ({"status": "error", "message": "Failed: Timeout >900.0s"}, "timeout"),
        ({"status": "failed", "exit_code": 1}, None),
        ({"status": "passed", "exit_code": 0}, None),
    ],
)
def test_infra_signatures(kwargs: dict[str, object], signature: str | None) -> None:
    assert classify(**kwargs) == signature  # type: ignore[arg-type]


def test_loose_files_ingest_once_and_keep_truncated_cases(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    warnings: list[str] = []
    first = ingest_paths(db, [DATA], warnings.append)
    assert len(first.added) == len(list(DATA.glob("*.xml")))
    assert len(warnings) == 2 and all("\n" not in w for w in warnings)
    again = ingest_paths(db, [DATA / "gtest.xml", DATA], warnings.append)
    assert again.added == [] and again.cases == 0
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT t.nodeid, c.status, c.headroom, c.extra FROM cases c"
            " JOIN tests t ON t.id = c.test JOIN runs r ON r.id = c.run"
            " WHERE r.source LIKE '%pytest_xunit1.xml'"
        ).fetchall()
    got = {nodeid: (status, head, extra) for nodeid, status, head, extra in rows}
    parity = "suites/kernel_parity/test_rms_norm.py::test_rms_norm[cuda-bfloat16-64]"
    assert got[parity][:2] == ("passed", 0.78)
    fusion = got["suites/fusion/test_passes.py::TestFusion::test_add_rms_norm"]
    assert json.loads(fusion[2]) == {
        "fusion.add_rms_norm.expected": "2",
        "fusion.add_rms_norm.found": "2",
    }


def test_run_folder_with_shards_and_missing_junit(tmp_path: Path) -> None:
    run = tmp_path / "reports" / "rocm" / "20261129T020000Z-abc"
    (run / "junit").mkdir(parents=True)
    shutil.copy(DATA / "pytest_xunit2.xml", run / "junit" / "kernel-shard-1-of-2.xml")
    shutil.copy(DATA / "jenkins.xml", run / "junit" / "kernel-shard-2-of-2.xml")
    manifest = {
        "schema": 1,
        "run_id": "20261129T020000Z-abc",
        "matrix": {"name": "rocm"},
        "platform": "rocm",
        "emulate": True,
        "started": "2026-11-29T02:00:00+00:00",
        "git": {"sha": "deadbeef"},
        "torch": "2.13.0",
        "status": "infra-error",
        "suites": [
            {"suite": "kernel", "status": "failed", "exit_code": 1},
            {"suite": "e2e", "status": "no-junit", "exit_code": 0},
        ],
        "infra_error": {"kind": "missing-junit", "message": "e2e wrote no JUnit"},
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    db = tmp_path / "h.sqlite"
    result = ingest_paths(db, [tmp_path / "reports"], pytest.fail)
    assert result.added == ["20261129T020000Z-abc"] and result.cases == 6
    with sqlite3.connect(db) as conn:
        assert conn.execute(
            "SELECT lane, git_sha, infra_signature, started FROM runs"
        ).fetchone() == ("rocm (emulated)", "deadbeef", "missing-junit", "2026-11-29T02:00:00Z")
        suites = dict(conn.execute("SELECT name, infra_signature FROM suites").fetchall())
    assert suites == {"kernel": None, "e2e": "missing-junit"}


def test_cli_ingest_and_ls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    assert cli.main(["history", "ingest", str(DATA / "gtest.xml"), "--db", str(db)]) == 0
    assert capsys.readouterr().out.startswith("ingested 1 run(s), 4 test case(s)")
    assert cli.main(["history", "ls", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "2026-11-28T05:00:00Z" in lines[1] and " 4 " in lines[1]
    assert cli.main(["history", "ingest", str(tmp_path / "nope"), "--db", str(db)]) == 2
    assert capsys.readouterr().err.startswith("harness: error: ")


def _run_folders(root: Path, count: int) -> Path:
    """``count`` run folders of real JUnit files, one of them truncated."""
    files = ["pytest_xunit1.xml", "pytest_rerunfailures.xml", "gtest.xml", "truncated.xml"]
    for index in range(count):
        run = root / "reports" / f"2026112{index % 10}T020000Z-r{index}"
        (run / "junit").mkdir(parents=True)
        for number, name in enumerate(files[: 1 + index % len(files)]):
            shutil.copy(DATA / name, run / "junit" / f"suite{number}-shard-1-of-1.xml")
        manifest = {
            "run_id": run.name,
            "matrix": {"name": ("rocm", "cuda")[index % 2]},
            "started": f"2026-11-2{index % 10}T02:00:00+00:00",
            "suites": [{"suite": "suite0", "status": "failed", "exit_code": 1}],
        }
        (run / "manifest.json").write_text(json.dumps(manifest))
    return root / "reports"


def _contents(db_path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table by value (ids resolved to names), so two ingests can be compared."""
    with sqlite3.connect(db_path) as db:
        return {
            "runs": sorted(db.execute("SELECT run_key, matrix, lane, started, source FROM runs")),
            "suites": sorted(
                db.execute(
                    "SELECT r.run_key, s.name, s.status, s.infra_signature, s.properties"
                    " FROM suites s JOIN runs r ON r.id = s.run"
                ),
                key=repr,
            ),
            "cases": sorted(
                db.execute(
                    "SELECT r.run_key, s.name, t.nodeid, t.key, c.status, c.duration,"
                    " c.message, c.reruns, c.infra_signature, c.provider, c.headroom, c.extra"
                    " FROM cases c JOIN runs r ON r.id = c.run JOIN suites s ON s.id = c.suite"
                    " JOIN tests t ON t.id = c.test"
                ),
                key=repr,
            ),
            "indexes": sorted(db.execute("SELECT name, sql FROM sqlite_master WHERE type='index'")),
            "dangling": db.execute("PRAGMA foreign_key_check").fetchall(),
        }


def test_parse_workers_store_what_in_process_parsing_stores(tmp_path: Path) -> None:
    reports = _run_folders(tmp_path, 5)
    got = {}
    for workers in (0, 2):
        warnings: list[str] = []
        db = tmp_path / f"w{workers}.sqlite"
        result = ingest_paths(db, [reports, DATA], warnings.append, workers=workers)
        got[workers] = (_contents(db), warnings, result.added, result.cases)
    assert got[0] == got[2]
    contents, warnings, added, cases = got[2]
    assert len(added) == 5 + len(list(DATA.glob("*.xml"))) and cases == len(contents["cases"])
    # Each damaged file warns once, in file order, whichever process parsed it.
    assert len(warnings) == 1 + 2 and all("\n" not in w for w in warnings)


def test_bulk_load_stores_what_one_run_at_a_time_stores(tmp_path: Path) -> None:
    reports = _run_folders(tmp_path, 12)
    bulk, single = tmp_path / "bulk.sqlite", tmp_path / "single.sqlite"
    assert len(ingest_paths(bulk, [reports], lambda _: None).added) == 12  # drops indexes
    for run in sorted(reports.iterdir()):
        assert len(ingest_paths(single, [run], lambda _: None).added) == 1  # keeps them
    assert _contents(bulk) == _contents(single)
    assert _contents(bulk)["dangling"] == []
    names = {name for name, _ in _contents(bulk)["indexes"]}
    assert {"cases_by_run", "cases_by_test"} <= names
    with sqlite3.connect(bulk) as db:
        plan = db.execute("EXPLAIN QUERY PLAN SELECT * FROM cases WHERE test = 3").fetchall()
    assert "cases_by_test" in str(plan)
    again = ingest_paths(bulk, [reports], pytest.fail)
    assert again.added == [] and len(again.skipped) == 12


def test_failed_ingest_adds_nothing_and_keeps_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fake failure half-way (the real paths are the tests above): all or nothing.
    reports = _run_folders(tmp_path, 10)
    db = tmp_path / "h.sqlite"
    real = ingest_mod.Writer.insert_run
    calls = []

    def failing(self: ingest_mod.Writer, values: tuple[object, ...]) -> int:
        calls.append(values)
        if len(calls) == 6:
            raise sqlite3.OperationalError("disk I/O error")
        return real(self, values)

    monkeypatch.setattr(ingest_mod.Writer, "insert_run", failing)
    with pytest.raises(sqlite3.OperationalError):
        ingest_paths(db, [reports], lambda _: None)
    contents = _contents(db)
    assert contents["runs"] == [] and contents["cases"] == []
    assert {"cases_by_run", "cases_by_test"} <= {name for name, _ in contents["indexes"]}
    monkeypatch.undo()
    assert len(ingest_paths(db, [reports], lambda _: None).added) == 10


def test_a_dead_parse_worker_is_one_line_and_adds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real child process that dies at once, in place of the parser.
    monkeypatch.setattr(parse_pool, "_WORKER", "import sys; sys.exit(3)")
    reports = _run_folders(tmp_path, 3)
    db = tmp_path / "h.sqlite"
    with pytest.raises(InfraError, match=r"^JUnit parser worker stopped \(exit 3\) before"):
        ingest_paths(db, [reports], lambda _: None, workers=2)
    assert _contents(db)["runs"] == []


def test_ingest_while_another_holds_the_write_lock_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_mod, "BUSY_TIMEOUT_S", 0.1)
    db = tmp_path / "h.sqlite"
    connect(db).close()
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(InfraError, match="history database is busy"):
            ingest_paths(db, [DATA / "gtest.xml"], pytest.fail)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert len(ingest_paths(db, [DATA / "gtest.xml"], pytest.fail).added) == 1


@pytest.mark.parametrize(
    ("cpus", "load", "min_bytes", "workers"),
    [(2, 0.1, 0, 2), (2, 1.0, 0, 0), (2, 7.0, 0, 0), (16, 0.5, 0, 4), (16, 0.0, 1 << 40, 0)],
)
def test_parse_workers_only_when_big_and_cpus_are_idle(
    monkeypatch: pytest.MonkeyPatch, cpus: int, load: float, min_bytes: int, workers: int
) -> None:
    monkeypatch.setattr(parse_pool.os, "sched_getaffinity", lambda _: set(range(cpus)))
    monkeypatch.setattr(parse_pool.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(parse_pool, "POOL_MIN_BYTES", min_bytes)
    assert parse_pool.default_workers(sorted(DATA.glob("*.xml"))) == workers
