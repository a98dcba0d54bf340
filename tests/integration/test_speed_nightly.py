"""Speed over nights, for real: a scratch engine (this project in a new repository) run as
nights by `harness run`, ingested, and reported by `harness report nightly`. Three good
nights make the band; a commit that adds a pass over silu_and_mul's output (about 1.5x its
time) is flagged the next night, and one that pins the engine's threads to 1 fails the
thread check the night after, while the slow kernel stays flagged; `harness bisect
--commits` names the thread commit. The first nights, with no band, flag nothing and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cdp import find_chromium, open_page
from scratch_repo import commit, copy_project

from harness.platform.budget import cpu_budget

PROVIDER = "refengine/providers/torch_provider.py"
GOOD_LINE = "    return F.silu(x[..., :d]) * x[..., d:]\n"
SLOW_LINE = "    return (F.silu(x[..., :d]) * x[..., d:]) * 1.0  # one more pass over the output\n"
PIN = "\ntorch.set_num_threads(1)  # the engine's own thread setting\n"
SELECT = "(silu_and_mul and odd and torch and not inductor) or budgeted_threads"
THREADS_TEST = ("suites/kernel_parity/test_engine_threads.py::"
                "test_engine_runs_with_the_budgeted_threads")




def _harness(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """harness as the scratch engine's own checkout runs it (its harness, its refengine)."""
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_HISTORY"}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=900, check=False)


def _night(repo: Path, reports: Path) -> None:
    done = _harness(repo, "run", "--matrix", "cpu", "--suite", "kernel_parity", "-k", SELECT,
                    "--python", "current", "--workers", "1", "--reports", str(reports))
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]


def _report(repo: Path, reports: Path, out: Path) -> tuple[str, dict[str, object]]:
    db = out / "history.sqlite"
    runs = sorted(str(p) for p in (reports / "cpu").iterdir())
    done = _harness(repo, "history", "ingest", "--db", str(db), *runs)
    assert done.returncode == 0, done.stderr
    done = _harness(repo, "report", "nightly", "--db", str(db), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return (out / "report.md").read_text(), json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("speed") / "engine"
    copy_project(repo)
    return repo


def test_a_slower_kernel_and_pinned_threads_are_flagged_and_bisected(
        engine: Path, tmp_path: Path) -> None:
    if cpu_budget().cpus < 2:
        pytest.skip("one CPU here: harness budgets one thread, so an engine's pin to 1 is "
                    "the budget (the check needs a host with 2 or more CPUs)")
    repo, reports = engine, tmp_path / "reports"
    good = commit(repo, "good")
    for _ in range(3):
        _night(repo, reports)
    text, data = _report(repo, reports, tmp_path / "r3")
    assert data["speed_regressions"] == []
    lanes = {s["lane"]: s for s in data["speed_lanes"]}  # type: ignore[attr-defined]
    assert "no band yet: 2 earlier night(s)" in lanes["cpu"]["note"], lanes
    assert "no band yet" in text

    provider = repo / PROVIDER
    provider.write_text(provider.read_text().replace(GOOD_LINE, SLOW_LINE))
    commit(repo, "silu_and_mul: one more pass")
    _night(repo, reports)
    text, data = _report(repo, reports, tmp_path / "r4")
    slow = data["speed_regressions"]
    assert slow and all("silu_and_mul torch" in g["op"] for g in slow), slow  # type: ignore[union-attr]
    assert all(g["slower"] >= 1.25 for g in slow), slow  # type: ignore[union-attr]
    assert "Slower than the lane's own band" in text and "silu_and_mul torch" in text
    _read_in_chromium(tmp_path / "r4" / "report.html", len(slow))  # type: ignore[arg-type]

    provider.write_text(provider.read_text().replace("import torch\n", "import torch\n" + PIN, 1))
    pinned = commit(repo, "torch provider: one thread")
    _night(repo, reports)
    text, data = _report(repo, reports, tmp_path / "r5")
    assert data["speed_regressions"], "the slow kernel stays flagged the night after"
    new = [c["key"] for c in data["tonight"]["regressions"]]  # type: ignore[index]
    assert any("test_engine_runs_with_the_budgeted_threads" in key for key in new), new
    assert "test_engine_runs_with_the_budgeted_threads" in text

    done = _harness(repo, "bisect", "--matrix", "cpu", "--test", THREADS_TEST, "--python",
                    "current", "--commits", f"{good}..{pinned}", "--repo", str(repo),
                    "--reports", str(tmp_path / "b"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    last = [line for line in done.stdout.splitlines() if line.startswith("harness: bisect:")][-1]
    assert last == f"harness: bisect: first bad commit: {pinned[:7]} torch provider: one thread"


SPEED_SECTION = """JSON.stringify((() => {
  const s = document.getElementById('speed');
  const r = s.getBoundingClientRect();
  return {
    flagged: [...s.querySelectorAll('#speed-regressions tbody tr')].map(tr => tr.textContent),
    rows: [...s.querySelectorAll('#speed-grid tbody tr')].map(tr => tr.textContent),
    lines: s.querySelectorAll('#speed-grid svg.spark polyline').length,
    header_link: !!document.querySelector('a[href="#speed"]'),
    width: r.width,
  };
})())"""


def _read_in_chromium(page: Path, flagged: int) -> None:
    """The page's speed section as a person sees it: the flagged rows, the grid with a
    trend line a cell, the header's link, and no script error."""
    chromium = find_chromium()
    if chromium is None:
        return  # tests/browser skips the same way where there is no Chromium
    with open_page(chromium, page, 1366, 768) as tab:
        tab.evaluate("document.getElementById('speed').scrollIntoView()")
        seen = json.loads(tab.evaluate(SPEED_SECTION))
        errors = tab.errors()
    assert errors == []
    assert len(seen["flagged"]) == flagged and all("silu_and_mul torch" in row
                                                  for row in seen["flagged"]), seen
    assert any(row.startswith("silu_and_mul torch") for row in seen["rows"]), seen
    assert seen["lines"] >= len(seen["rows"]) and seen["header_link"] and seen["width"] > 0
