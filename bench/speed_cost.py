"""What the speed tier costs (issue 51; the goal: at most 20% of its lanes' suite time):
the same suite of a lane with the speed tier on and off (``HARNESS_SPEED=off``: the parity
cases pass the same way and record no time), run side by side in one run of this script,
alternating, each ``harness run`` timed whole (start-up, collection and the suite).

    python bench/speed_cost.py [--matrix cpu] [--suite kernel_parity] [--pairs 2] \\
        [--out /tmp/speed-cost]

Printed: each run's wall time, each side's median, and the ratio on / off.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness.platform.host import cpu_model_and_flags
from harness.plugin.speed import SPEED_ENV

ROOT = Path(__file__).resolve().parents[1]


def _timed(matrix: str, suite: str, reports: Path, speed: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness", "run", "--matrix", matrix, "--suite",
                    suite, "--reports", str(reports)], cwd=ROOT, check=False,
                   env={**os.environ, SPEED_ENV: speed}, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", default="cpu")
    parser.add_argument("--suite", default="kernel_parity")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/speed-cost"))
    args = parser.parse_args()
    times: dict[str, list[float]] = {"on": [], "off": []}
    for n in range(args.pairs):
        order = ("off", "on") if n % 2 else ("on", "off")
        for side in order:
            seconds = _timed(args.matrix, args.suite, args.out / side, side)
            times[side].append(seconds)
            print(f"pair {n + 1} speed {side:<3} {seconds:7.1f} s", flush=True)
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    model, _, _ = cpu_model_and_flags()
    print(f"host: {model}, {os.cpu_count()} CPUs; {args.matrix} {args.suite}, "
          f"{args.pairs} pairs")
    print(f"median: speed tier on {on:.1f} s, off {off:.1f} s; on / off = {on / off:.3f} "
          f"(+{on / off - 1:.1%}; goal <= +20%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
