"""Several nights of real pytest runs -> history -> nightly report, section by section."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest
from report_history import make_history

from harness import cli
from harness.history import ingest_paths
from harness.reports import build_report
from harness.reports.model import Report

pytestmark = pytest.mark.slow

KERNEL = "test_kernel.py"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dt.datetime]:
    root = tmp_path_factory.mktemp("nights")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    make_history(root, now)
    db = root / "history.sqlite"
    warnings: list[str] = []
    result = ingest_paths(db, [root / "reports"], warnings.append)
    assert warnings == []
    assert len(result.added) == 6
    return root, db, now


@pytest.fixture(scope="module")
def report(history: tuple[Path, Path, dt.datetime]) -> Report:
    _, db, now = history
    return build_report(db, since=dt.timedelta(days=14), now=now, declared=False)


def key(name: str) -> str:
    return f"{KERNEL}::{name}"


def test_ingest_is_idempotent(history: tuple[Path, Path, dt.datetime]) -> None:
    root, db, _ = history
    again = ingest_paths(db, [root / "reports"], print)
    assert again.added == [] and len(again.skipped) == 6
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 6
        runs = conn.execute("SELECT lane, infra_signature FROM runs ORDER BY started").fetchall()
    assert ("rocm", "gpu-hang") in runs


def test_suite_grid_flags_gaps(report: Report) -> None:
    cells = {(c.lane, c.suite): c for c in report.suite_grid}
    assert report.suites == ["e2e", "fusion", "kernel"]
    assert cells[("rocm", "fusion")].state == "all-skipped"
    assert cells[("rocm", "fusion")].flagged
    assert cells[("rocm", "e2e")].state == "absent"
    assert cells[("cpu", "e2e")].state == "infra"
    assert "missing-junit" in cells[("cpu", "e2e")].reason
    assert cells[("cpu", "fusion")].state == "passed" and not cells[("cpu", "fusion")].flagged
    kernel = cells[("cpu", "kernel")]
    assert kernel.state == "failed"
    assert kernel.counts == {"passed": 6, "failed": 2, "skipped": 1}
    assert cells[("rocm", "kernel")].counts == {"passed": 8}


def test_test_grid_cells(report: Report) -> None:
    rows = {row.key: row.cells for row in report.test_grid}
    assert rows[key("test_rms_norm[float32]")] == {"cpu": "passed", "rocm": "passed"}
    assert rows[key("test_needs_fp8")] == {"cpu": "skipped", "rocm": "passed"}
    assert rows[key("test_cpu_only")] == {"cpu": "passed", "rocm": "never-ran"}
    assert rows[key("test_regresses_tonight")] == {"cpu": "failed", "rocm": "passed"}
    # Problems first.
    assert report.test_grid[0].cells["cpu"] == "failed"


def test_capability_coverage(report: Report) -> None:
    caps = {c.name: c for c in report.capabilities}
    assert caps["triton"].tests == {"cpu": 2, "rocm": 2}
    assert caps["fp8_e4m3fnuz"].tests["rocm"] == 1
    assert caps["fp8"].tests["rocm"] == 1  # through its child
    assert caps["fp8"].provided == {"cpu": False, "rocm": True}
    assert sorted(report.uncovered) == [("cpu", "inductor"), ("rocm", "cuda_graphs")]


def test_regressions_fixes_streaks(report: Report) -> None:
    assert [(c.lane, c.key, c.before, c.after) for c in report.regressions] == [
        ("cpu", key("test_regresses_tonight"), "passed", "failed"),
    ]
    assert "drifted" in report.regressions[0].message
    assert [(c.lane, c.key) for c in report.fixes] == [("cpu", key("test_flips"))]
    assert [(s.lane, s.key, s.runs) for s in report.streaks] == [
        ("cpu", key("test_keeps_failing"), 2),
    ]


def test_flaky_apart_from_infrastructure(report: Report) -> None:
    assert [(f.lane, f.key, f.flips) for f in report.flaky] == [("cpu", key("test_flips"), 2)]
    signatures = {(e.scope, e.signature) for e in report.infra}
    assert ("run", "gpu-hang") in signatures
    assert ("suite", "gpu-hang") in signatures
    assert ("suite", "missing-junit") in signatures
    hung = [e for e in report.infra if e.scope == "case"]
    assert [(e.lane, e.name, e.signature) for e in hung] == [
        ("rocm", key("test_hangs_once"), "gpu-hang"),
    ]


def test_headroom_trends_and_fusion_drift(report: Report) -> None:
    assert {(h.lane, h.key, h.headroom) for h in report.headroom} == {
        ("cpu", key("test_rms_norm[bfloat16]"), 0.93),
        ("rocm", key("test_rms_norm[bfloat16]"), 0.93),
    }
    trend = {(s.label, s.lane): s for s in report.error_trends}
    assert [v for _, v in trend[("rms_norm", "cpu")].points] == [0.93, 0.93, 0.93]
    drift = [s for s in report.fusion if s.drifted]
    assert [(s.lane, s.label, [v for _, v in s.points], s.expected) for s in drift] == [
        ("cpu", "fusion.add_rms_norm", [2.0, 2.0, 1.0], 2.0),
    ]


def test_known_failures_passing_or_expiring(report: Report) -> None:
    states = {(k.lane, k.pattern): k.state for k in report.known_failures}
    assert states == {
        ("cpu", "*::test_fixed_now"): "now-passing",
        ("cpu", "*::test_not_here*"): "expiring",
    }


def test_window_excludes_old_runs(history: tuple[Path, Path, dt.datetime]) -> None:
    _, db, now = history
    recent = build_report(db, since=dt.timedelta(hours=36), now=now, declared=False)
    assert [lane.runs for lane in recent.lanes] == [1, 1]
    assert recent.regressions == [] and recent.flaky == []


def test_cli_writes_three_files(
    history: tuple[Path, Path, dt.datetime], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, db, _ = history
    out = tmp_path / "out"
    code = cli.main(
        ["report", "nightly", "--history", str(db), "--since", "14d", "--out", str(out)]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "regressions" in printed.splitlines()[0]
    html = (out / "report.html").read_text()
    assert "http://" not in html and "https://" not in html and "src=" not in html
    md = (out / "report.md").read_text()
    assert len(md) < 4000 and str(out / "report.html") in md
    assert "test_regresses_tonight" in md
    data = json.loads((out / "report.json").read_text())
    assert data["schema"] == 1 and data["regressions"][0]["key"].endswith("tonight")


def test_cli_bad_since_is_one_line(
    history: tuple[Path, Path, dt.datetime], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, db, _ = history
    code = cli.main(
        ["report", "nightly", "--history", str(db), "--since", "fortnight", "--out", str(tmp_path)]
    )
    assert code == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
