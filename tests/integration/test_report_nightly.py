"""Nights of real ``harness run`` folders -> history -> nightly report, section by section.

The history (tests/report_history.py, the session fixture ``nightly_history``) has, on its
last night, a regression, a fix, an infrastructure crash, a suite that started skipping
and a known failure that now passes; report.md must name each of them.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sqlite3
from pathlib import Path

import pytest
from report_history import KNOWN_ID, LANES, SUITES, History

from harness import cli
from harness.history import ingest_paths
from harness.reports import build_report
from harness.reports.model import Report

KERNELS = f"{SUITES}/check_kernels.py"


def key(name: str) -> str:
    return f"{KERNELS}::{name}"


@pytest.fixture(scope="module")
def db(nightly_history: History, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("db") / "history.sqlite"
    warnings: list[str] = []
    result = ingest_paths(path, [nightly_history.reports], warnings.append)
    assert warnings == []
    assert len(result.added) == len(nightly_history.runs) == 10
    return path


@pytest.fixture(scope="module")
def report(db: Path) -> Report:
    return build_report(db, since=dt.timedelta(days=14), declared=False)


def test_the_runs_exit_as_harness_run_says(nightly_history: History) -> None:
    codes = nightly_history.exit_codes
    assert codes[("cpu", 3)] == 1  # failing tests
    assert codes[("rocm-mi300x", 3)] == 3  # the crash: an infrastructure error
    assert codes[("cuda-h100", 3)] == 0


def test_ingest_is_idempotent(nightly_history: History, db: Path) -> None:
    again = ingest_paths(db, [nightly_history.reports], print)
    assert again.added == [] and len(again.skipped) == 10
    with sqlite3.connect(db) as conn:
        lanes = {row[0] for row in conn.execute("SELECT lane FROM runs")}
    assert lanes == set(LANES)


def test_suite_grid_shows_only_declared_suites(report: Report) -> None:
    cells = {(c.lane, c.suite): c for c in report.suite_grid}
    assert report.suites == ["features", "kernels"]
    assert cells[("cpu", "features")].state == "mostly-skipped"
    assert cells[("cpu", "features")].flagged
    assert cells[("cpu", "features")].counts == {"passed": 1, "skipped": 9}
    # Declared by rocm-mi355x but not run: the flag.
    assert cells[("rocm-mi355x", "features")].state == "absent"
    assert cells[("rocm-mi355x", "features")].flagged
    # Not declared: blank, not flagged.
    for lane in ("cuda-h100", "xpu-max1550", "zen-genoa", "s390x-z15", "rocm-mi300x"):
        assert cells[(lane, "features")].state == "undeclared"
        assert not cells[(lane, "features")].flagged
    assert cells[("cpu", "kernels")].state == "failed"
    assert cells[("rocm-mi300x", "kernels")].state == "infra"
    assert cells[("cuda-h100", "kernels")].state == "passed"
    # each suite's peak test memory, as its tests recorded it (plugin/memory.py): a test
    # process holds at least its interpreter and pytest
    assert all((cells[(lane, "kernels")].peak_rss_mb or 0) > 20
               for lane in ("cpu", "cuda-h100"))


def test_test_grid_cells_and_short_ids(report: Report) -> None:
    rows = {row.key: row for row in report.test_grid}
    regress = rows[key("test_regresses_tonight")]
    assert regress.cells["cpu"] == "failed" and regress.cells["cuda-h100"] == "passed"
    assert regress.short == "check_kernels.py::test_regresses_tonight"
    assert rows[f"{SUITES}/check_features.py::test_feature[feature3]"].cells == {
        "cpu": "skipped",
        **{lane: "never-ran" for lane in LANES if lane not in ("cpu", "rocm-mi355x")},
        "rocm-mi355x": "never-ran",
    }
    assert len({row.short for row in report.test_grid}) == len(report.test_grid)
    assert report.test_grid[0].cells  # problems first
    assert any(s in ("failed", "error") for s in report.test_grid[0].cells.values())


def test_grid_keeps_every_problem_and_counts_the_rest(
    db: Path, report: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.reports.testgrid as grid_mod

    full = report.test_grid
    assert report.test_rows_total == len(full) > 3
    quiet = [r for r in full if set(r.cells.values()) <= {"passed", "never-ran"}]
    assert quiet  # tests that pass wherever they ran: the rows a cap may leave out
    monkeypatch.setattr(grid_mod, "GRID_ROWS", 1)
    capped = build_report(db, since=dt.timedelta(days=14), declared=False)
    assert capped.test_rows_total == report.test_rows_total
    kept = {row.key for row in capped.test_grid}
    assert kept == {full[0].key} | {r.key for r in full if r not in quiet}
    # The same rows, cells and notes, in the same order (short ids may be shorter).
    by_key = {row.key: row for row in full}
    assert [(r.key, r.cells, r.notes) for r in capped.test_grid] == [
        (r.key, by_key[r.key].cells, by_key[r.key].notes) for r in capped.test_grid
    ]
    assert [r.key for r in capped.test_grid] == [r.key for r in full if r.key in kept]
    assert capped.headline == report.headline
    from harness.reports.html import render_html

    total = report.test_rows_total
    assert f"showing the first {len(kept)} of {total} tests" in render_html(capped)
    assert "showing the first" not in render_html(report)


def test_what_changed_since_the_last_night(report: Report) -> None:
    tonight = report.tonight
    assert [(c.lane, c.key) for c in tonight.regressions] == [
        ("cpu", key("test_regresses_tonight"))
    ]
    assert sorted((c.lane, c.key) for c in tonight.fixes) == [
        ("cpu", key("test_fixed_tonight")),
        ("cpu", key("test_flips")),
    ]
    assert {(e.lane, e.scope) for e in tonight.new_infra if e.scope != "case"} == {
        ("rocm-mi300x", "run"),
        ("rocm-mi300x", "suite"),
    }
    assert [(s.lane, s.suite, s.before, s.skipped, s.total) for s in tonight.started_skipping] == [
        ("cpu", "features", "passed", 9, 10)
    ]
    assert [(k.lane, k.pattern, k.tests) for k in report.known_passing] == [
        ("cpu", KNOWN_ID, [KNOWN_ID])
    ]
    # quarantined, it failed on nights 1 and 2: intermittent, not "remove the entry"
    (known,) = report.known_passing
    assert (known.action, known.nights) == ("quarantine", (1, 3))
    assert known.advice == ("intermittent: passed 1 of the last 3 nights; keep it quarantined "
                            "until it passes every night")
    assert report.headline.startswith(
        "1 new failures, 2 fixed, 2 new infra failures, 1 suites started skipping"
    )


def test_streaks_flakes_headroom(report: Report) -> None:
    assert [(s.lane, s.key, s.runs) for s in report.streaks] == [
        ("cpu", key("test_keeps_failing"), 3)
    ]
    assert [(f.lane, f.key, f.flips) for f in report.flaky] == [("cpu", key("test_flips"), 2)]
    assert {h.headroom for h in report.headroom} == {0.9}
    cpu = next(s for s in report.pass_rates if s.lane == "cpu")
    assert len(cpu.points) == 3


def test_window_before_the_last_night(nightly_history: History, db: Path) -> None:
    assert nightly_history.before_last is not None
    now = dt.datetime.now(dt.UTC)
    last = build_report(db, since=now - nightly_history.before_last, now=now, declared=False)
    assert {lane.name: lane.runs for lane in last.lanes} == dict.fromkeys(LANES, 1)
    assert last.tonight.regressions == [] and last.flaky == []


def test_report_md_names_every_change(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = cli.main(["report", "nightly", "--db", str(db), "--out", str(out)])
    assert code == 0
    md = (out / "report.md").read_text()
    sections = re.findall(r"^### (.+)$", md, flags=re.M)
    assert sections == [
        "New failures (1)",
        "Infrastructure failures (2)",
        "Mostly skipped (1)",
        "Known failures that now pass (1)",
    ]
    assert "test_regresses_tonight" in md
    assert "[rocm-mi300x](report.html#infra-" in md
    assert "[cpu / features](report.html#suite-" in md
    assert "test_fixed_upstream" in md
    assert "intermittent: passed 1 of the last 3 nights" in md
    assert "remove the entry" not in md
    assert len(md) < 4000
    # Every link points into the page, at an id the page has.
    html = (out / "report.html").read_text()
    for anchor in re.findall(r"\(report\.html#([\w-]+)\)", md):
        assert f'id="{anchor}"' in html, anchor
    # The hostile failure message is quoted inert: inside a code span, nothing raw.
    outside_code = re.sub(r"`[^`]*`", "", md)
    assert "<img" not in outside_code and "@org" not in outside_code
    assert "](http://example.invalid" not in outside_code
    html_text = html.split("<script>")[0]
    assert "<img" not in html_text and "&lt;img src=x" in html_text
    data = json.loads((out / "report.json").read_text())
    assert data["schema"] == 5
    assert data["tonight"]["regressions"][0]["key"] == key("test_regresses_tonight")
    assert data["tonight"]["started_skipping"][0]["suite"] == "features"


def test_report_md_caps_each_list(db: Path, tmp_path: Path) -> None:
    from harness.reports.markdown import TOP, render_markdown

    report = build_report(db, since=dt.timedelta(days=14), declared=False)
    report.tonight.regressions = report.tonight.regressions * (TOP + 3)
    md = render_markdown(report, html_url="https://ci.example/artifacts/report.html")
    assert md.count("test_regresses_tonight") == TOP
    assert "… and 3 more: [full list](https://ci.example/artifacts/report.html#regressions)" in md


def test_cli_bad_since_is_one_line(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(
        ["report", "nightly", "--db", str(db), "--since", "fortnight", "--out", str(tmp_path)]
    )
    assert code == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
