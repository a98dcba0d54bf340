"""What the harness costs on top of pytest, and how fast its CLI starts.

Runs the same suite through ``harness run --python current`` and through plain
``pytest --platform`` with the same worker count, alternated (after one warm-up of
each, so compile caches are warm for both), and prints the median wall times and
their ratio. Then times ``harness --help`` (which must not import torch).

    python bench/overhead.py [--repeats 5] [--suite platform] [--matrix cpu] [-k EXPR]

Targets (issue 2): ratio <= 1.05; ``harness --help`` median under 0.3 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"bench: {' '.join(argv)} exited {done.returncode}:\n{done.stdout[-2000:]}"
                 f"{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--suite", default="platform")
    parser.add_argument("--matrix", default="cpu")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("-k", dest="keyword", default=None)
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from harness.matrix import load_matrix

    suite_path = str(ROOT / load_matrix(args.matrix).suites[args.suite].path)
    reports = Path(tempfile.mkdtemp(prefix="harness-bench-"))
    keyword = ["-k", args.keyword] if args.keyword else []
    via_harness = [sys.executable, "-m", "harness", "run", "--matrix", args.matrix,
                   "--suite", args.suite, "--python", "current", "--workers",
                   str(args.workers), "--reports", str(reports), *keyword]
    plain = [sys.executable, "-m", "pytest", suite_path, "--platform", args.matrix,
             "-p", "no:cacheprovider", "-q", "-n", str(args.workers), *keyword]
    if args.workers == 1:
        plain = plain[:-2 - len(keyword)] + keyword

    print(f"suite {args.suite} on {args.matrix}, {args.workers} workers, "
          f"{args.repeats} alternated pairs after one warm-up each")
    timed(via_harness)
    timed(plain)
    harness_times, pytest_times = [], []
    for i in range(args.repeats):
        pair = [(via_harness, harness_times), (plain, pytest_times)]
        if i % 2:
            pair.reverse()  # alternate which goes first, so drift hits both alike
        for argv, times in pair:
            times.append(timed(argv))
    h, p = statistics.median(harness_times), statistics.median(pytest_times)
    print(f"harness run  median {h:7.2f} s  {[round(t, 2) for t in harness_times]}")
    print(f"plain pytest median {p:7.2f} s  {[round(t, 2) for t in pytest_times]}")
    print(f"ratio harness/pytest: {h / p:.3f}  (target <= 1.05)")

    help_times = [timed([sys.executable, "-m", "harness", "--help"]) for _ in range(9)]
    print(f"harness --help median {statistics.median(help_times):.3f} s  (target < 0.3 s)")
    check = subprocess.run(
        [sys.executable, "-c", "import sys; from harness.cli import build_parser; "
         "build_parser(); print('torch' in sys.modules)"],
        cwd=ROOT, capture_output=True, text=True, check=True)
    print(f"torch imported by the CLI at start-up: {check.stdout.strip()}")


if __name__ == "__main__":
    main()
