"""Open the nightly report in a real headless Chromium: no console errors, right cells."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from cdp import find_chromium, load_page

from harness.history import ingest_paths
from harness.reports import build_report, write_reports

CHROMIUM = find_chromium()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt install chromium)"),
]

CELLS = """JSON.stringify({
  suites: [...document.querySelectorAll('#suite-grid td[data-suite]')]
    .map(td => [td.dataset.lane, td.dataset.suite, td.dataset.state]),
  tests: [...document.querySelectorAll('#test-grid tbody tr')]
    .map(tr => [tr.dataset.test, ...[...tr.querySelectorAll('td[data-lane]')]
      .map(td => td.dataset.lane + '=' + td.dataset.state)]),
  filtered: (() => {
    const box = document.getElementById('test-filter');
    box.value = 'gemm'; box.dispatchEvent(new Event('input'));
    return [...document.querySelectorAll('#test-grid tbody tr')]
      .filter(tr => tr.style.display !== 'none').length;
  })(),
  svg: document.querySelectorAll('svg').length,
})"""


def _junit(cases: str) -> str:
    suite = f'<testsuite name="pytest">{cases}</testsuite>'
    return f'<?xml version="1.0"?><testsuites>{suite}</testsuites>'


def _run(root: Path, lane: str, started: dt.datetime, suites: dict[str, str]) -> None:
    folder = root / lane / f"{started:%Y%m%dT%H%M%SZ}-{lane}"
    (folder / "junit").mkdir(parents=True)
    for suite, cases in suites.items():
        (folder / "junit" / f"{suite}.xml").write_text(_junit(cases))
    manifest = {
        "schema": 1,
        "run_id": folder.name,
        "matrix": {"name": lane},
        "platform": lane,
        "started": started.isoformat(),
        "status": "done",
        "suites": [{"suite": s, "status": "passed", "exit_code": 0} for s in suites],
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    ok = '<testcase classname="test_gemm" name="test_gemm[{d}-float16]" file="test_gemm.py"/>'
    bad = (
        '<testcase classname="test_gemm" name="test_bias" file="test_gemm.py">'
        '<failure message="mismatch &lt;script&gt;">x</failure></testcase>'
    )
    skip = (
        '<testcase classname="test_fuse" name="test_fp8" file="test_fuse.py">'
        '<skipped message="no fp8"/></testcase>'
    )
    _run(
        root / "runs",
        "cpu",
        now - dt.timedelta(hours=2),
        {"kernel": ok.format(d="cpu") + bad, "fusion": skip},
    )
    _run(root / "runs", "cuda", now - dt.timedelta(hours=1), {"kernel": ok.format(d="cuda:0")})
    db = root / "h.sqlite"
    ingest_paths(db, [root / "runs"], pytest.fail)
    report = build_report(db, since=dt.timedelta(days=1), now=now, declared=False)
    return write_reports(report, root / "out")["html"]


def test_report_loads_without_errors_and_shows_cells(report_html: Path) -> None:
    assert CHROMIUM is not None
    value, errors = load_page(CHROMIUM, report_html, CELLS)
    assert errors == []
    got = json.loads(value)
    assert sorted(map(tuple, got["suites"])) == [
        ("cpu", "fusion", "all-skipped"),
        ("cpu", "kernel", "failed"),
        ("cuda", "fusion", "absent"),
        ("cuda", "kernel", "passed"),
    ]
    tests = {row[0]: row[1:] for row in got["tests"]}
    assert tests == {
        "test_gemm.py::test_bias": ["cpu=failed", "cuda=never-ran"],
        "test_fuse.py::test_fp8": ["cpu=skipped", "cuda=never-ran"],
        "test_gemm.py::test_gemm[float16]": ["cpu=passed", "cuda=passed"],
    }
    assert got["filtered"] == 2  # the inline filter script ran
    assert got["svg"] >= 1


def test_a_broken_script_is_caught(report_html: Path, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    broken = tmp_path / "broken.html"
    text = report_html.read_text().replace(
        "</body>", "<script>window.noSuchFunction();</script></body>"
    )
    broken.write_text(text)
    _, errors = load_page(CHROMIUM, broken, "1")
    assert len(errors) == 1 and "noSuchFunction" in errors[0]
