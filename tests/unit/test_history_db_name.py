"""One name for the history database: ``--db`` in ``history ingest``, ``history ls`` and
``report nightly`` alike; ``report nightly --history`` (its old name) still reads the same
database, with a note that says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main

JUNIT = Path(__file__).resolve().parents[1] / "data" / "junit" / "pytest_xunit2.xml"


def test_report_nightly_reads_the_database_ingest_wrote_by_the_same_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "h.sqlite")
    assert main(["history", "ingest", str(JUNIT), "--db", db, "--lane", "cpu"]) == 0
    assert main(["report", "nightly", "--db", db, "--since", "100000d",
                 "--out", str(tmp_path / "new")]) == 0
    assert "deprecated" not in capsys.readouterr().err
    assert main(["report", "nightly", "--history", db, "--since", "100000d",
                 "--out", str(tmp_path / "old")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["harness: report nightly --history is deprecated: use --db (the name "
                   "`harness history ingest` uses)"]
    new, old = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("new", "old"))
    assert [lane["name"] for lane in new["lanes"] if lane["runs"]] == ["cpu"]
    assert new["test_rows_total"] == old["test_rows_total"] > 0


def test_an_absent_database_is_one_line_under_either_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--db", "--history"):
        assert main(["report", "nightly", flag, str(tmp_path / "none.sqlite"),
                     "--out", str(tmp_path / "out")]) == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last == (f"harness: error: {tmp_path / 'none.sqlite'}: no history database "
                        "here (run `harness history ingest` first)")
