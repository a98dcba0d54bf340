"""History store: migrations, idempotent ingest, infra signatures, CLI."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from harness import cli
from harness.errors import ConfigError
from harness.history import SCHEMA_VERSION, connect, ingest_paths
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
