"""History store: migrations, idempotent ingest, infra signatures, CLI."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runs import SUITE, Runs, copy_runs

from harness import cli
from harness.errors import ConfigError, InfraError
from harness.history import SCHEMA_VERSION, connect, ingest_paths, parse_pool
from harness.history import ingest as ingest_mod
from harness.history import schema as schema_mod
from harness.history.infra import guess_label
from harness.results.cause import Cause, CauseRecord
from harness.results.manifest import RunRecord

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


def _database_at(path: Path, version: int) -> sqlite3.Connection:
    """A history database as a harness of schema ``version`` left it (its migrations up to
    there, nothing after)."""
    raw = sqlite3.connect(path)
    schema_mod.current_version(raw)
    for migration in schema_mod.MIGRATIONS[:version]:
        migration(raw)
    raw.execute("INSERT INTO schema_version VALUES (?)", (version,))
    return raw


def test_a_version_3_database_loses_runs_platform_and_still_ingests(
    real_runs: Runs, tmp_path: Path
) -> None:
    path = tmp_path / "v3.sqlite"
    raw = _database_at(path, 3)
    raw.execute("INSERT INTO runs (run_key, matrix, lane, platform, started, source, ingested)"
                " VALUES ('old', 'cpu', 'cpu', 'cpu', '2026-01-01T00:00:00Z', 'x', 'now')")
    raw.commit()
    raw.close()
    ingest_paths(path, [real_runs.passing], pytest.fail)
    db = connect(path)
    columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    assert "platform" not in columns and {"matrix", "lane", "shard", "build"} <= columns
    keys = [row[0] for row in db.execute("SELECT run_key FROM runs ORDER BY id")]
    assert keys == ["old", real_runs.passing.name]


def test_a_version_4_database_keeps_its_infra_signatures_as_labels(
    real_runs: Runs, tmp_path: Path
) -> None:
    """Data an earlier harness wrote: a run stored before migration 5 (its infrastructure
    failure under ``infra_signature``) reads back under ``infra_label``, and the database
    still ingests a run of today's harness beside it."""
    path = tmp_path / "v4.sqlite"
    raw = _database_at(path, 4)
    raw.execute("INSERT INTO runs (run_key, matrix, lane, started, source, ingested, "
                "infra_signature) VALUES ('old', 'cpu', 'cpu', '2026-01-01T00:00:00Z', 'x', "
                "'now', 'oom-kill')")
    raw.commit()
    raw.close()
    ingest_paths(path, [real_runs.passing], pytest.fail)
    db = connect(path)
    assert schema_mod.current_version(db) == SCHEMA_VERSION
    rows = db.execute("SELECT run_key, infra_label FROM runs ORDER BY id").fetchall()
    assert rows == [("old", "oom-kill"), (real_runs.passing.name, None)]
    for table in ("runs", "suites", "cases"):
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        assert "infra_label" in columns and "infra_signature" not in columns, table


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
def test_infra_labels(kwargs: dict[str, object], signature: str | None) -> None:
    assert guess_label(**kwargs) == signature  # type: ignore[arg-type]


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


def test_real_run_folders(real_runs: Runs, tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    result = ingest_paths(db, [real_runs.reports], pytest.fail)
    assert sorted(result.added) == sorted(p.name for p in real_runs.all)
    with sqlite3.connect(db) as conn:
        for run in real_runs.all:
            record = RunRecord.read(run)
            stored = dict(
                conn.execute(
                    "SELECT c.status, count(*) FROM cases c JOIN runs r ON r.id = c.run"
                    " WHERE r.run_key = ? GROUP BY c.status",
                    (record.run_id,),
                ).fetchall()
            )
            counts = {k: v for k, v in record.counts().as_dict().items() if v}
            assert stored == counts, run
        fingerprint, lane, git = conn.execute(
            "SELECT fingerprint, lane, git_sha FROM runs WHERE run_key = ?",
            (real_runs.passing.name,),
        ).fetchone()
        assert json.loads(fingerprint)["kind"] == "lscpu" and lane == "record" and git
        crashed = conn.execute(
            "SELECT status, infra_label FROM runs WHERE run_key = ?",
            (real_runs.crashed.name,),
        ).fetchone()
        # exit 4: a finding, no infrastructure label (os.abort(): SIGABRT on a CPU
        # lane, no GPU hang), as the suite row says
        assert crashed == ("crashed", None)
        suite = conn.execute(
            "SELECT s.status, s.infra_label FROM suites s JOIN runs r ON r.id = s.run"
            " WHERE r.run_key = ?", (real_runs.crashed.name,),
        ).fetchone()
        assert suite == ("crashed", None)
        assert RunRecord.read(real_runs.crashed).suites[0].cause == CauseRecord(
            cause=Cause.SIGNAL, signal="SIGABRT", exit_code=-6)
        ids = {row[0] for row in conn.execute("SELECT nodeid FROM tests")}
    # pytest's own ids, also for decorated tests and test classes: never rebuilt.
    assert f"{SUITE}::test_decorated[float32]" in ids
    assert f"{SUITE}::test_context_decorated" in ids
    assert f"{SUITE}::TestLater::test_after_the_crash" in ids
    before = _contents(db)
    again = ingest_paths(db, [real_runs.reports], pytest.fail)
    assert again.added == [] and _contents(db) == before


def test_a_case_s_node_id_and_platform_are_not_stored_again(
    real_runs: Runs, tmp_path: Path
) -> None:
    """The plugin writes the node id of every case in the JUnit file's sidecar (xunit2 has
    no per-case properties) and the matrix on its testsuite, no platform per case: ingest
    keeps the node id as the case's test and the suite's matrix, and the case's platform
    an older plugin or another producer wrote only where it says something else."""
    junit = (real_runs.passing / "junit" / "record.xml").read_text()
    sidecar = (real_runs.passing / "junit" / "record.partial.jsonl").read_text()
    assert 'name="platform"' not in junit and "nodeid" not in junit
    assert '"platform"' not in sidecar and sidecar.count('"nodeid"') > 3
    db = tmp_path / "h.sqlite"
    ingest_paths(db, [real_runs.passing], pytest.fail)
    with sqlite3.connect(db) as conn:
        extras = [row[0] for row in conn.execute("SELECT extra FROM cases")]
        (props,) = conn.execute("SELECT properties FROM suites").fetchone()
    assert json.loads(props)["matrix"] == "record"
    assert not any(extra and {"platform", "nodeid"} & set(json.loads(extra)) for extra in extras)
    other = tmp_path / "other.xml"
    other.write_text(
        '<testsuite name="s"><properties><property name="matrix" value="cpu"/></properties>'
        '<testcase classname="m" name="t"><properties>'
        '<property name="platform" value="rocm"/></properties></testcase>'
        '<testcase classname="m" name="u"><properties>'
        '<property name="platform" value="cpu"/></properties></testcase></testsuite>'
    )
    ingest_paths(db, [other], pytest.fail)
    with sqlite3.connect(db) as conn:
        extras = conn.execute(
            "SELECT c.extra FROM cases c JOIN runs r ON r.id = c.run WHERE r.source = ?"
            " ORDER BY c.rowid", (str(other),),
        ).fetchall()
    assert [json.loads(e) if e else None for (e,) in extras] == [{"platform": "rocm"}, None]


def test_a_corrupted_run_is_one_line_and_the_others_land(real_runs: Runs, tmp_path: Path) -> None:
    runs = copy_runs(real_runs, tmp_path)
    bad = runs.failing / "manifest.json"
    bad.write_text(bad.read_text().replace('"seed": 0', '"seed": "zero"'))
    (runs.reports / "record" / "stray.xml").write_text("<html>502 Bad Gateway</html>")
    warnings: list[str] = []
    db = tmp_path / "h.sqlite"
    result = ingest_paths(db, [runs.reports], warnings.append)
    # The good runs, and the stray file as an infrastructure failure.
    assert len(result.added) == len(real_runs.all) - 1 + 1
    assert warnings == [
        f"{bad}: seed: expected int, got \"zero\"; run skipped",
        f"{runs.reports / 'record' / 'stray.xml'}: not JUnit; recorded as an infrastructure"
        " failure",
    ]
    with sqlite3.connect(db) as conn:
        assert conn.execute(
            "SELECT status, infra_label FROM runs WHERE source LIKE '%stray.xml'"
        ).fetchone() == ("error", "missing-junit")


def test_one_run_that_cannot_be_stored_leaves_the_others(
    real_runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fake database failure on one run (the real bad inputs are the test above).
    db = tmp_path / "h.sqlite"
    real = ingest_mod.Writer.insert_cases
    calls = []

    def failing(self: ingest_mod.Writer, *args: object) -> int:
        calls.append(args)
        if len(calls) == 2:
            raise sqlite3.OperationalError("disk I/O error")
        return real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ingest_mod.Writer, "insert_cases", failing)
    warnings: list[str] = []
    result = ingest_paths(db, [real_runs.reports], warnings.append)
    assert len(result.added) == len(real_runs.all) - 1 and len(result.failed) == 1
    assert len(warnings) == 1 and "disk I/O error" in warnings[0]
    assert _contents(db)["dangling"] == []
    monkeypatch.undo()
    again = ingest_paths(db, [real_runs.reports], pytest.fail)
    assert again.added == result.failed
    fresh = tmp_path / "fresh.sqlite"
    ingest_paths(fresh, [real_runs.reports], pytest.fail)
    assert _contents(db)["cases"] == _contents(fresh)["cases"]


def test_cli_ingest_and_ls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    assert cli.main(["history", "ingest", str(DATA / "gtest.xml"), "--db", str(db)]) == 0
    assert capsys.readouterr().out.startswith("ingested 1 run(s), 4 test case(s)")
    assert cli.main(["history", "ls", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "2026-11-28T05:00:00Z" in lines[1] and " 4 " in lines[1]
    assert cli.main(["history", "ingest", str(tmp_path / "nope"), "--db", str(db)]) == 2
    assert capsys.readouterr().err.startswith("harness: error: ")


def _run_folders(real_runs: Runs, root: Path, count: int) -> Path:
    """``count`` run folders: copies of the real ones, each under its own run id."""
    for index in range(count):
        source = real_runs.all[index % len(real_runs.all)]
        run_id = f"{source.name}-{index}"
        target = root / "reports" / "record" / run_id
        shutil.copytree(source, target)
        record = RunRecord.read(target)
        record.run_id = run_id
        (target / "manifest.json").write_text(record.to_json())
    return root / "reports"


def _contents(db_path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table by value (ids resolved to names), so two ingests can be compared."""
    with sqlite3.connect(db_path) as db:
        return {
            "runs": sorted(db.execute("SELECT run_key, matrix, lane, started, source FROM runs")),
            "suites": sorted(
                db.execute(
                    "SELECT r.run_key, s.name, s.status, s.infra_label, s.properties"
                    " FROM suites s JOIN runs r ON r.id = s.run"
                ),
                key=repr,
            ),
            "cases": sorted(
                db.execute(
                    "SELECT r.run_key, s.name, t.nodeid, t.key, c.status, c.duration,"
                    " c.message, c.reruns, c.infra_label, c.provider, c.headroom, c.extra"
                    " FROM cases c JOIN runs r ON r.id = c.run JOIN suites s ON s.id = c.suite"
                    " JOIN tests t ON t.id = c.test"
                ),
                key=repr,
            ),
            "indexes": sorted(db.execute("SELECT name, sql FROM sqlite_master WHERE type='index'")),
            "dangling": db.execute("PRAGMA foreign_key_check").fetchall(),
        }


def test_parse_workers_store_what_in_process_parsing_stores(
    real_runs: Runs, tmp_path: Path
) -> None:
    reports = _run_folders(real_runs, tmp_path, 5)
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
    assert len(warnings) == 2 and all("\n" not in w for w in warnings)


def test_bulk_load_stores_what_one_run_at_a_time_stores(real_runs: Runs, tmp_path: Path) -> None:
    reports = _run_folders(real_runs, tmp_path, 12)
    bulk, single = tmp_path / "bulk.sqlite", tmp_path / "single.sqlite"
    assert len(ingest_paths(bulk, [reports], lambda _: None).added) == 12  # drops indexes
    for run in sorted((reports / "record").iterdir()):
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


def test_a_dead_parse_worker_is_one_line_and_adds_nothing(
    real_runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real child process that dies at once, in place of the parser.
    monkeypatch.setattr(parse_pool, "_WORKER", "import sys; sys.exit(3)")
    reports = _run_folders(real_runs, tmp_path, 3)
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
    ("idle", "min_bytes", "workers"),
    [(2.0, 0, 2), (1.4, 0, 0), (0.0, 0, 0), (15.6, 0, 4), (16.0, 1 << 40, 0)],
)
def test_parse_workers_only_when_big_and_cpus_are_idle(
    monkeypatch: pytest.MonkeyPatch, idle: float, min_bytes: int, workers: int
) -> None:
    monkeypatch.setattr(parse_pool, "idle_cpus", lambda: idle)
    monkeypatch.setattr(parse_pool, "POOL_MIN_BYTES", min_bytes)
    assert parse_pool.default_workers(sorted(DATA.glob("*.xml"))) == workers


def test_idle_cpus_counts_a_busy_cpu_as_busy() -> None:
    """The real /proc/stat: a process spinning on one of this process's CPUs takes
    about one CPU off the idle count (the count is never below 0 or above the CPUs)."""
    cpus = sorted(os.sched_getaffinity(0))
    quiet = parse_pool.idle_cpus(0.2)
    assert 0.0 <= quiet <= len(cpus)
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        busy = parse_pool.idle_cpus(0.5)
    finally:
        spin.kill()
        spin.wait()
    assert 0.0 <= busy <= len(cpus) - 0.6


def test_worker_pipes_hold_several_batches() -> None:
    """A worker's stdout pipe is widened, so it can parse ahead of the writer (with
    the default 64 KiB it waited after every file: 13 s for 1M cases, not 9.5)."""
    read, write = os.pipe()
    try:
        with os.fdopen(read, "rb") as pipe:
            parse_pool._widen(pipe)
            assert fcntl.fcntl(read, fcntl.F_GETPIPE_SZ) == parse_pool.PIPE_BYTES
    finally:
        os.close(write)


def _one_big_suite(real_runs: Runs, tmp_path: Path, copies: int) -> tuple[Path, int]:
    """The failing run folder with its JUnit's test cases repeated ``copies`` times
    under new names, all in its one <testsuite>: what `harness run` writes, only more
    of it. Returns the folder and the number of cases in it."""
    import re

    target = tmp_path / "big" / "record" / f"{real_runs.failing.name}-big"
    shutil.copytree(real_runs.failing, target)
    record = RunRecord.read(target)
    record.run_id = target.name
    (target / "manifest.json").write_text(record.to_json())
    [junit] = sorted((target / "junit").glob("*.xml"))
    text = junit.read_text()
    cases = re.findall(r"<testcase [^>]*/>|<testcase [^>]*[^/]>.*?</testcase>", text, flags=re.S)
    assert len(cases) > 5 and text.count("<testsuite ") == 1
    more = []
    for copy in range(copies):
        for case in cases:
            case = re.sub(r'(<testcase [^>]*?\bname=")', rf"\g<1>c{copy}_", case, count=1)
            more.append(case.replace("check_record.py::", f"check_record.py::c{copy}_"))
    end = text.rindex("</testsuite>")
    junit.write_text(text[:end] + "".join(more) + text[end:])
    return target.parent.parent, len(cases) * (copies + 1)


def test_a_worker_sends_a_big_suite_in_bounded_batches(real_runs: Runs, tmp_path: Path) -> None:
    from harness.history import rows as rows_mod
    from harness.results.junit_read import JunitReader

    folder, total = _one_big_suite(real_runs, tmp_path, 1000)
    [junit] = sorted(folder.rglob("junit/*.xml"))
    messages = list(parse_pool._messages(junit, rows_mod.RowMaker()))
    *batches, (kind, suites, warnings) = messages
    assert kind == "end" and [s[0] for s in suites] and warnings == []
    assert {k for k, _, _ in batches} == {"rows"}
    assert len(batches) == -(-total // rows_mod.BATCH) >= 4
    sizes = [sum(len(rows) for _, rows in groups.values()) for _, (groups, _), _ in batches]
    assert max(sizes) == rows_mod.BATCH and sum(sizes) == total
    # Each node id's key travels once; every row says what the case read says.
    sent = [nodeid for _, (_, new), _ in batches for nodeid in new]
    cases = list(JunitReader(junit, pytest.fail))
    assert sorted(sent) == sorted({case.nodeid for case in cases})
    got = [
        (nodeid, *row[:3])
        for _, (groups, _), _ in batches
        for nodeids, rows in groups.values()
        for nodeid, row in zip(nodeids, rows, strict=True)
    ]
    want = [(c.nodeid, c.status, c.duration, c.reruns) for c in cases]
    assert sorted(got) == sorted(want)


def test_one_big_suite_streamed_in_batches_stores_what_whole_reading_stores(
    real_runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.history import rows as rows_mod
    from harness.results import junit_read

    folder, total = _one_big_suite(real_runs, tmp_path, 1000)  # over 8k cases, one suite
    assert total > 2 * rows_mod.BATCH
    got = {}
    for workers in (0, 2):  # in-process; real worker processes, 2048 cases a message
        db = tmp_path / f"w{workers}.sqlite"
        result = ingest_paths(db, [folder], pytest.fail, workers=workers)
        got[workers] = (_contents(db), result.cases)
    # The old path: the whole suite held (no rerun window) and one INSERT batch.
    monkeypatch.setattr(junit_read, "_RERUN_WINDOW", 1 << 30)
    monkeypatch.setattr(rows_mod, "BATCH", 1 << 30)
    whole = tmp_path / "whole.sqlite"
    result = ingest_paths(whole, [folder], pytest.fail, workers=0)
    assert got[0] == got[2] == (_contents(whole), result.cases)
    contents = got[0][0]
    assert len(contents["cases"]) == result.cases
    # Every copy of the failing run's outcomes, counted like the original run's.
    counts = {k: v for k, v in RunRecord.read(real_runs.failing).counts().as_dict().items() if v}
    stored: dict[str, int] = {}
    for row in contents["cases"]:
        stored[str(row[4])] = stored.get(str(row[4]), 0) + 1
    assert stored == {k: v * result.cases // sum(counts.values()) for k, v in counts.items()}


def test_a_node_id_gives_its_own_key_again(real_runs: Runs) -> None:
    # The writer derives (key, params) from a node id when the parser sent them for a
    # run since rolled back: every id the reader makes must give them back unchanged.
    from harness.history.rows import key_and_params
    from harness.results.junit_read import read_junit

    files = [*DATA.glob("*.xml"), *real_runs.reports.rglob("junit/*.xml")]
    cases = [case for path in files for case in read_junit(path, lambda _: None)[0]]
    assert len({case.nodeid for case in cases}) > 20
    for case in cases:
        assert key_and_params(case.nodeid, {}) == (case.key, case.params), case.nodeid


def test_a_rolled_back_run_s_tests_are_written_again_by_the_next_run(
    real_runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two copies of one run: the first fails after its tests were written, so the
    # second (whose node ids the parser already sent) writes them again, keys and all.
    reports = _run_folders(real_runs, tmp_path, 2 * len(real_runs.all))
    real = ingest_mod.Writer.insert_cases
    calls: list[object] = []

    def failing_first(self: ingest_mod.Writer, *args: object) -> int:
        calls.append(args)
        count = real(self, *args)  # type: ignore[arg-type]
        if len(calls) == 1:
            raise sqlite3.OperationalError("disk I/O error")
        return count

    from harness.history import rows as rows_mod

    derived: list[str] = []
    stable_ids = rows_mod.stable_ids
    monkeypatch.setattr(rows_mod, "stable_ids", lambda n: derived.append(n) or stable_ids(n))
    monkeypatch.setattr(ingest_mod.Writer, "insert_cases", failing_first)
    db = tmp_path / "h.sqlite"
    result = ingest_paths(db, [reports], lambda _: None, workers=0)
    assert len(result.failed) == 1 and derived  # the keys were derived again
    monkeypatch.undo()
    fresh = tmp_path / "fresh.sqlite"
    ingest_paths(fresh, [reports], pytest.fail, workers=0)
    with sqlite3.connect(db) as one, sqlite3.connect(fresh) as two:
        query = "SELECT nodeid, key, params FROM tests ORDER BY nodeid"
        assert one.execute(query).fetchall() == two.execute(query).fetchall()
    assert _contents(db)["dangling"] == []


def test_a_manifest_reads_back_to_the_same_json(real_runs: Runs) -> None:
    """The typed record (suites, causes, host, threads, fingerprint) writes back the
    object it read: the manifest's format is the record's."""
    for run in real_runs.all:
        text = (run / "manifest.json").read_text()
        assert json.loads(RunRecord.read(run).to_json()) == json.loads(text), run
    record = RunRecord.read(real_runs.passing)
    assert record.host is not None and record.host.cpu_count
    assert record.threads is not None and record.threads.workers
    assert record.device_fingerprint is not None
    assert record.device_fingerprint.kind == "lscpu"
