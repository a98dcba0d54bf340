"""Read the nightly report in a real headless Chromium, as a person would, at two sizes.

The page comes from the history of real ``harness run`` folders (``nightly_history``:
7 lanes). At 1366x768 and 1920x1080: the first screen holds the headline and the change
list, every platform column of the test grid is inside the viewport, the filters change
the visible rows, and nothing logs an error. Screenshots of both sizes land in the test's
output folder (printed, and recorded as the ``screenshots`` property).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from cdp import find_chromium, load_page, open_page
from report_history import LANES, History

from harness.history import ingest_paths
from harness.reports import build_report, write_reports

CHROMIUM = find_chromium()
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt install chromium)"),
]

FIRST_SCREEN = """JSON.stringify((() => {
  const box = e => { const r = e.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  return {
    width: document.documentElement.clientWidth, height: window.innerHeight,
    headline: box(document.getElementById('headline')),
    changes: box(document.getElementById('changes')),
    change_links: [...document.querySelectorAll('#changes li a')].map(a => a.textContent),
    lanes: [...document.querySelectorAll('#test-grid thead th.lane-col')]
      .map(th => [th.textContent, box(th)]),
    first_col: box(document.querySelector('#test-grid thead th.first')),
    page_scrolls_sideways: document.documentElement.scrollWidth > window.innerWidth,
  };
})())"""

FILTERS = """JSON.stringify((() => {
  const visible = () => [...document.querySelectorAll('#test-grid tbody tr')]
    .filter(tr => tr.offsetParent !== null).map(tr => tr.dataset.test);
  const box = document.getElementById('test-filter');
  const chip = v => document.querySelector(`.state-filter[value="${v}"]`);
  const all = visible().length;
  box.value = 'check_features'; box.dispatchEvent(new Event('input'));
  const text = visible();
  box.value = ''; box.dispatchEvent(new Event('input'));
  chip('failed').click();
  const failed = visible();
  const counter = document.getElementById('test-shown').textContent;
  chip('failed').click();
  return {all, text, failed, counter, back: visible().length,
          chip_count: chip('failed').parentElement.querySelector('.count').textContent};
})())"""


@pytest.fixture(scope="module")
def report_html(nightly_history: History, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    db = root / "history.sqlite"
    ingest_paths(db, [nightly_history.reports], pytest.fail)
    report = build_report(db, since=dt.timedelta(days=14), declared=False)
    assert len(report.lanes) == 7
    return write_reports(report, root / "out")["html"]


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("report-screenshots")


@pytest.mark.parametrize(("width", "height"), [(1366, 768), (1920, 1080)])
def test_page_reads_at_screen_size(
    report_html: Path,
    output_dir: Path,
    width: int,
    height: int,
    record_property: pytest.RecordProperty,
) -> None:
    assert CHROMIUM is not None
    with open_page(CHROMIUM, report_html, width, height) as tab:
        first = json.loads(tab.evaluate(FIRST_SCREEN))
        shots = [tab.screenshot(output_dir / f"report-{width}x{height}-first-screen.png")]
        tab.evaluate("document.getElementById('tests').scrollIntoView()")
        shots.append(tab.screenshot(output_dir / f"report-{width}x{height}-test-grid.png"))
        filters = json.loads(tab.evaluate(FILTERS))
        errors = tab.errors()
    print(f"screenshots: {', '.join(map(str, shots))}")
    record_property("screenshots", " ".join(map(str, shots)))
    assert errors == []
    assert all(shot.stat().st_size > 10_000 for shot in shots)

    # The first screen: the headline and the whole change list.
    assert first["headline"]["top"] >= 0 and first["changes"]["bottom"] <= first["height"]
    assert "test_regresses_tonight" in first["change_links"]
    assert "cpu / features" in first["change_links"]
    assert "test_fixed_upstream" in first["change_links"]
    assert "rocm-mi300x" in first["change_links"]

    # Every platform column of the test grid inside the viewport, without scrolling sideways.
    assert [name for name, _ in first["lanes"]] == sorted(LANES)
    for name, box in first["lanes"]:
        assert box["left"] >= 0 and box["right"] <= first["width"], (name, box)
    assert not first["page_scrolls_sideways"]

    # Filters change the visible rows; the counter and the chip counts agree.
    assert filters["all"] == filters["back"] > 10
    assert len(filters["text"]) == 10 and all("check_features" in t for t in filters["text"])
    assert sorted(t.rsplit("::", 1)[-1] for t in filters["failed"]) == [
        "test_keeps_failing",
        "test_regresses_tonight",
    ]
    assert filters["chip_count"] == "2"
    assert filters["counter"].startswith("2 of ")


def test_a_broken_script_is_caught(report_html: Path, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    broken = tmp_path / "broken.html"
    text = report_html.read_text().replace(
        "</body>", "<script>window.noSuchFunction();</script></body>"
    )
    broken.write_text(text)
    _, errors = load_page(CHROMIUM, broken, "1")
    assert len(errors) == 1 and "noSuchFunction" in errors[0]
