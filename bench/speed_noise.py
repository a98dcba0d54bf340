"""The speed tier's noise on this host (issue 51): N identical runs of a lane's parity
suite (its speed tier: one case per op, provider and dtype records a speed), each case's
ratio across them, and whether the nightly report flags any of them against the band the
earlier runs make.

    python bench/speed_noise.py [--matrix cpu] [--runs 5] [--suite kernel_parity] \\
        [--out /tmp/speed-noise]

Each run is ``harness run --matrix M --suite S --reports OUT/runs``, one after another
on this host as it is (its other load included); then ``harness history ingest`` into
OUT/history.sqlite and ``harness report nightly --out OUT/report``. Printed: per case its
ratios and spread ((max - min) / median across the runs), the spreads' median and 90th
percentile (the issue's goal: p90 <= 10%), the report's flagged speed regressions (the
goal: none), and the host.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from harness.platform.host import cpu_model_and_flags
from harness.results import speed
from harness.results.run_folder import read_run

ROOT = Path(__file__).resolve().parents[1]


def _harness(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, check=False,
                   env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL)


def _print_runs(folders: list[Path], ratios: dict[str, list[float]]) -> None:
    """Per run, how far its cases' ratios lay from their medians across the runs: a run
    the host slowed throughout moves many cases at once (one state, not each case's own)."""
    for n, folder in enumerate(folders):
        off = sorted(abs(v[n] / statistics.median(v) - 1) for v in ratios.values())
        if not off:
            continue
        p90 = statistics.quantiles(off, n=10, method="inclusive")[-1] if len(off) > 1 else off[0]
        print(f"run {n + 1} ({folder.name}): its cases off their medians by "
              f"{statistics.median(off):.1%} (median), {p90:.1%} (p90)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", default="cpu")
    parser.add_argument("--suite", default="kernel_parity")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("/tmp/speed-noise"))
    args = parser.parse_args()
    runs = args.out / "runs"
    for n in range(args.runs):
        print(f"run {n + 1} of {args.runs}", flush=True)
        _harness("run", "--matrix", args.matrix, "--suite", args.suite, "--reports",
                 str(runs))
    folders = sorted((runs / args.matrix).iterdir())[-args.runs:]
    ratios: dict[str, list[float]] = defaultdict(list)
    for folder in folders:
        for case in read_run(folder, lambda _line: None).cases.values():
            if case.speed is not None:
                ratios[case.nodeid].append(case.speed)
    spreads = {k: (max(v) - min(v)) / statistics.median(v) for k, v in ratios.items()
               if len(v) == len(folders)}
    for key, spread in sorted(spreads.items(), key=lambda item: -item[1]):
        shown = " ".join(f"{r:.3g}" for r in ratios[key])
        print(f"{spread:6.1%}  {shown}  {key.split('::')[-1]}")
    _print_runs(folders, {k: v for k, v in ratios.items() if k in spreads})
    db = args.out / "history.sqlite"
    db.unlink(missing_ok=True)
    _harness("history", "ingest", "--db", str(db), *map(str, folders))
    _harness("report", "nightly", "--db", str(db), "--out", str(args.out / "report"))
    report = json.loads((args.out / "report" / "report.json").read_text())
    values = sorted(spreads.values())
    p90 = statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else 0
    model, _, _ = cpu_model_and_flags()
    print(f"host: {model}, {os.cpu_count()} CPUs; lane {args.matrix}, {len(folders)} runs")
    print(f"cases with a speed in every run: {len(spreads)}; spread across runs: "
          f"median {statistics.median(values):.1%}, p90 {p90:.1%}, max {values[-1]:.1%} "
          f"(goal: p90 <= 10%)")
    flagged = report["speed_regressions"]
    print(f"flagged by the nightly report: {len(flagged)} (band: {speed.MIN_NIGHTS} earlier "
          f"runs at least, margin {speed.MARGIN:.0%})")
    for item in flagged:
        print(f"  {item['lane']} {item['op']}: {item['slower']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
