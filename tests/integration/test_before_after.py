"""scripts/before_after.py, the refactor check (docs/architecture.md, "Where to add"): two
runs of one commit differ in nothing once it masks what differs between runs, and a
difference in what a run wrote is shown. The crashed and timed-out scenarios (a project the
script writes, on the cpu matrix's environment) keep it to about a minute."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "before_after.py"
FILES = ("manifest.json", "matrix.json", "merged.xml", "report.json")


def _compare(work: Path, *more: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--before", "HEAD", "--after", "HEAD", "--work", str(work),
         "--scenario", "crashed", "--scenario", "timed-out", *more],
        cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def test_two_runs_of_one_commit_differ_in_nothing_and_a_change_shows(tmp_path: Path) -> None:
    out = _compare(tmp_path)
    assert "before crashed: exit 4" in out and "after timed-out: exit 3" in out, out
    verdicts = [line for line in out if line.startswith("-- ")]
    assert verdicts == [f"-- {name}: same" for name in FILES] * 2, "\n".join(out)
    # the worktrees are gone, the runs' folders kept
    listed = subprocess.run(["git", "-C", str(REPO), "worktree", "list"], capture_output=True,
                            text=True, check=True).stdout
    assert str(tmp_path) not in listed

    [manifest] = (tmp_path / "after" / "out" / "crashed" / "reports").glob("*/*/manifest.json")
    record = json.loads(manifest.read_text())
    record["suites"][0]["status"] = "passed"
    manifest.write_text(json.dumps(record))
    out = _compare(tmp_path, "--diff-only")
    crashed = out[out.index("== crashed"):out.index("== timed-out")]
    assert crashed[1] == "-- manifest.json: 2 lines differ", "\n".join(out)
    assert crashed[2:4] == ['   -.suites[*].status = "crashed"', '   +.suites[*].status = "passed"']
    assert crashed[4:] == [f"-- {name}: same" for name in FILES[1:]]
