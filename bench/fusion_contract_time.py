"""The fusion suite's time on the cpu lane, this tree against a base ref (default main),
side by side: the base checked out in a temporary git worktree, the two run alternately
(old, new, old, new, ...) so drift on a shared machine hits both alike. Each run is
``harness run --matrix cpu --suite fusion --python current`` from its own tree (PYTHONPATH
and HARNESS_ROOT name it, so its harness, refengine and suites run); the suite's time is
the run manifest's. Prints every run, the medians and new/old (issue 34: under 1.20).

    python bench/fusion_contract_time.py [--base main] [--rounds 3]

Needs the cpu matrix's caches primed (``harness cache prime --matrix cpu``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_fusion(tree: Path, reports: Path) -> tuple[float, float, str]:
    """(suite s from the manifest, wall s, outcome) of one fusion-suite run in ``tree``."""
    env = os.environ | {"PYTHONPATH": str(tree), "HARNESS_ROOT": str(tree)}
    argv = [sys.executable, "-m", "harness", "run", "--matrix", "cpu", "--suite", "fusion",
            "--python", "current", "--reports", str(reports)]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    manifests = sorted(reports.glob("*/*/manifest.json"), key=lambda p: p.stat().st_mtime)
    if not manifests:
        sys.exit(f"bench: no run folder from {tree} (exit {done.returncode}):\n"
                 f"{done.stdout[-3000:]}{done.stderr[-2000:]}")
    suite = json.loads(manifests[-1].read_text())["suites"][0]
    return float(suite["duration_s"]), wall, f"exit {done.returncode}, {suite.get('outcome')}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="the git ref to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="harness-fusion-time-"))
    old = work / "base"
    subprocess.run(["git", "worktree", "add", "--detach", str(old), args.base], cwd=ROOT,
                   check=True, capture_output=True)
    times: dict[str, list[float]] = {"old": [], "new": []}
    try:
        for i in range(args.rounds):
            for side, tree in (("old", old), ("new", ROOT)):
                suite, wall, outcome = run_fusion(tree, work / f"reports-{side}")
                times[side].append(suite)
                print(f"round {i + 1} {side}: fusion {suite:.1f} s (wall {wall:.1f} s, "
                      f"{outcome})", flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT,
                       check=False, capture_output=True)
    med = {side: statistics.median(ts) for side, ts in times.items()}
    ratio = med["new"] / med["old"]
    print(f"median old {med['old']:.1f} s, new {med['new']:.1f} s: new/old {ratio:.3f} "
          f"({'ok' if ratio < 1.2 else 'MISSED'}: target < 1.20)")


if __name__ == "__main__":
    main()
