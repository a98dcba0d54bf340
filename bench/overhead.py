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
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False,
                          env=None if env is None else os.environ | env)
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

    # The same thread settings the harness gives each worker, so the ratio is the
    # harness's own overhead, not the thread budget's effect (shown separately).
    from harness.platform.budget import cpu_budget
    from harness.run.threads import plan_threads

    budget_env = plan_threads(args.workers, cpu_budget(), environ={}).env()
    print(f"suite {args.suite} on {args.matrix}, {args.workers} workers, "
          f"{args.repeats} rounds after one warm-up each; thread env {budget_env}")
    variants = [
        ("harness run", via_harness, None),
        ("pytest, same threads", plain, budget_env),
        ("pytest, default threads", plain, None),
    ]
    for _, argv, env in variants:
        timed(argv, env)
    times: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    for i in range(args.repeats):
        order = variants[i % len(variants):] + variants[:i % len(variants)]
        for name, argv, env in order:  # rotate the order, so drift hits all alike
            times[name].append(timed(argv, env))
    med = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"{name:<24} median {med[name]:7.2f} s  {[round(x, 2) for x in t]}")
    print(f"ratio harness / pytest with the same threads: "
          f"{med['harness run'] / med['pytest, same threads']:.3f}  (target <= 1.05)")
    print(f"ratio harness / pytest with default threads:  "
          f"{med['harness run'] / med['pytest, default threads']:.3f}  (thread budget effect)")

    help_times = [timed([sys.executable, "-m", "harness", "--help"]) for _ in range(9)]
    print(f"harness --help median {statistics.median(help_times):.3f} s  (target < 0.3 s)")
    check = subprocess.run(
        [sys.executable, "-c", "import sys; from harness.cli import build_parser; "
         "build_parser(); print('torch' in sys.modules)"],
        cwd=ROOT, capture_output=True, text=True, check=True)
    print(f"torch imported by the CLI at start-up: {check.stdout.strip()}")


if __name__ == "__main__":
    main()
