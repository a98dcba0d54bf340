"""A user's matrix that extends a lane for its suites reads the lane's golden ids until it
records its own, and records them into the project, never into the harness that ships the
suite (harness/matrix/lane_data.py): through ``harness run`` as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_GOLDEN = ROOT / "suites" / "e2e" / "golden"


def harness(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = args or ("run", "--matrix", "mine", "--python", "current")
    return subprocess.run([sys.executable, "-m", "harness", "--root", str(project), *command],
                          cwd=project, capture_output=True, text=True, timeout=600,
                          check=False)


def test_a_derived_lane_reads_its_parents_ids_then_its_own_from_the_project(
        tmp_path: Path) -> None:
    project = tmp_path / "engine"
    (project / "matrices").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.harness]\n")
    (project / "matrices" / "mine.yaml").write_text(
        "extends: cpu.yaml\ndescription: the cpu lane, e2e alone\nsuites:\n"
        + "".join(f"  {s}: {{enabled: false}}\n" for s in ("platform", "kernel_parity",
                                                          "fusion"))
        + "  e2e: {k: native}\n")
    primed = harness(project, "cache", "prime", "--matrix", "mine")
    assert primed.returncode == 0, primed.stdout + primed.stderr
    first = harness(project)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    assert "2 passed" in first.stdout  # the cpu lane's ids, inherited

    recorded = harness(project, "run", "--matrix", "mine", "--python", "current",
                       "--update-expectations")
    assert recorded.returncode == 0, recorded.stdout[-3000:] + recorded.stderr[-2000:]
    own = project / "lane-data" / "suites" / "e2e" / "golden" / "mine.json"
    assert own.is_file() and not (SHIPPED_GOLDEN / "mine.json").exists()

    data = json.loads(own.read_text())
    key = sorted(data["ids"])[0]
    data["ids"][key][0] += 1  # the project's own file is the one read now
    own.write_text(json.dumps(data))
    moved = harness(project)
    assert moved.returncode == 1, moved.stdout[-3000:]
    assert f"golden {data['ids'][key][0]} ({own})" in moved.stdout, moved.stdout[-3000:]
