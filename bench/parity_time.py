"""Wall time of the cpu matrix's kernel-parity suite: thread budget on vs off, side by side.

Runs `harness run --matrix cpu --suite kernel_parity --python current --workers 2` twice
in one go, first with the harness's thread budget (workers x torch threads fit the
cgroup quota), then with HARNESS_THREAD_BUDGET=off (every worker takes all cores), and
prints both times and their ratio, wall and CPU (user + sys of the whole process tree:
the host is shared, so wall time alone mixes in other load). The first run also warms
inductor's on-disk cache, so a --warmup run is done first unless --no-warmup is given.

    python bench/parity_time.py [--matrix cpu] [--workers 2] [--no-warmup]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_suite(matrix: str, workers: int, env_extra: dict[str, str],
              reports: Path) -> tuple[float, float, int]:
    cmd = [sys.executable, "-m", "harness", "run", "--matrix", matrix, "--suite", "kernel_parity",
           "--python", "current", "--workers", str(workers), "--reports", str(reports)]
    env = dict(os.environ, **env_extra)
    start, cpu_start = time.perf_counter(), _children_cpu()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, _children_cpu() - cpu_start
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
    print(f"  exit {proc.returncode} in {elapsed:.1f}s wall, {cpu:.1f}s CPU: {' | '.join(tail)}",
          flush=True)
    return elapsed, cpu, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", default="cpu")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument("--reports", default=str(ROOT / "reports" / "bench"))
    args = parser.parse_args()
    reports = Path(args.reports)
    if not args.no_warmup:
        print("warm-up (fills the inductor cache):", flush=True)
        run_suite(args.matrix, args.workers, {}, reports)
    print("thread budget on:", flush=True)
    budget, budget_cpu, rc_on = run_suite(args.matrix, args.workers, {}, reports)
    print("thread budget off (HARNESS_THREAD_BUDGET=off):", flush=True)
    unbudgeted, unbudgeted_cpu, rc_off = run_suite(
        args.matrix, args.workers, {"HARNESS_THREAD_BUDGET": "off"}, reports)
    print(f"\nkernel_parity on {args.matrix}, {args.workers} workers, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}:")
    print(f"             {'wall s':>8} {'CPU s':>8}")
    print(f"  budget on  {budget:8.1f} {budget_cpu:8.1f}")
    print(f"  budget off {unbudgeted:8.1f} {unbudgeted_cpu:8.1f}")
    print(f"  off / on   {unbudgeted / budget:7.2f}x {unbudgeted_cpu / budget_cpu:7.2f}x")
    return 0 if rc_on == rc_off == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
