"""Shard balance in CI: the shards of one build, each on an agent with an empty history,
fed the same durations file (`harness run --durations`), make the same plan, which
`harness ci check-shards` confirms from their run folders; shards fed different files
plan differently, and that is exit 3, not a silent overlap.

Real runs of the platform suite (under xdist, two workers: each worker plans too), one
history made from a real run, the durations file `harness ci durations` writes from it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.roots import project_root

ROOT = project_root()
SHARDS = 2


def harness(*args: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, **(env or {})})


def _ids(run: Path) -> set[str]:
    out = set()
    for junit in (run / "junit").glob("*.xml"):
        for case in ET.parse(junit).getroot().iter("testcase"):
            out.add(f"{case.get('classname')}::{case.get('name')}")
    return out


def _shard(reports: Path, index: int, durations: Path, agent: Path,
           build: str) -> tuple[Path, float]:
    """One shard as a CI agent with no history of its own runs it."""
    before = set((reports / "cpu").glob("*")) if (reports / "cpu").is_dir() else set()
    started = time.monotonic()
    done = harness("run", "--suite", "platform", "--python", "current", "--workers", "2",
                   "--shard", f"{index}/{SHARDS}", "--durations", str(durations),
                   "--reports", str(reports),
                   env={"HARNESS_HISTORY": str(agent / "history.sqlite"),
                        "HARNESS_BUILD": build})
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "balanced by" in done.stdout and str(durations) in done.stdout
    assert not (agent / "history.sqlite").exists()  # an empty history, and it stayed so
    (run,) = set((reports / "cpu").glob("*")) - before
    return run, seconds


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    """The durations file of a history holding one real run of the suite, and its tests."""
    base = tmp_path_factory.mktemp("history")
    done = harness("run", "--suite", "platform", "--python", "current", "--reports",
                   str(base / "reports"))
    assert done.returncode == 0, done.stdout[-2000:]
    (run,) = (base / "reports" / "cpu").iterdir()
    db = base / "history.sqlite"
    assert harness("history", "ingest", str(base / "reports"), "--db", str(db)).returncode == 0
    made = harness("ci", "durations", "--matrix", "cpu", "--db", str(db), "--out-dir",
                   str(base / "durations"))
    assert made.returncode == 0, made.stderr
    durations = base / "durations" / "cpu.json"
    assert len(json.loads(durations.read_text())["durations"]) > 5
    return durations, _ids(run)


def test_shards_fed_one_durations_file_plan_alike_and_partition_the_suite(
        tmp_path: Path, timed: tuple[Path, set[str]]) -> None:
    durations, every = timed
    reports = tmp_path / "reports"
    runs, seconds = [], []
    for index in range(1, SHARDS + 1):
        run, took = _shard(reports, index, durations, tmp_path / f"agent-{index}", "b1")
        runs.append(run)
        seconds.append(took)
    parts = [_ids(run) for run in runs]
    assert set.union(*parts) == every and sum(map(len, parts)) == len(every)  # no overlap
    plans = [json.loads(p.read_text()) for run in runs
             for p in (run / "shard-plans").glob("*.json")]
    assert len(plans) == SHARDS and len({p["fingerprint"] for p in plans}) == 1
    check = harness("ci", "check-shards", str(reports))
    assert check.returncode == 0, check.stderr
    assert "2 shard(s) planned alike" in check.stdout
    print(f"shard wall times: {', '.join(f'{s:.1f} s' for s in seconds)}; "
          f"tests {', '.join(str(len(p)) for p in parts)} of {len(every)}")


def test_shards_fed_different_durations_are_an_infrastructure_failure(
        tmp_path: Path, timed: tuple[Path, set[str]]) -> None:
    durations, _ = timed
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"schema": 1, "matrix": "cpu", "durations": {},
                                 "siblings": {}}))
    reports = tmp_path / "reports"
    first, _ = _shard(reports, 1, durations, tmp_path / "agent-1", "b2")
    second, _ = _shard(reports, 2, empty, tmp_path / "agent-2", "b2")
    prints = {json.loads(p.read_text())["fingerprint"] for run in (first, second)
              for p in (run / "shard-plans").glob("*.json")}
    assert len(prints) == 2  # an equal-weights plan is not the timed one
    check = harness("ci", "check-shards", str(reports))
    assert check.returncode == 3
    err = check.stderr.strip().splitlines()
    assert len(err) == 1 and "the shards planned differently" in err[0], check.stderr
