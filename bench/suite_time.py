"""Wall time of the fusion and e2e suites on the cpu matrix, cold compile cache vs warm.

Cold: a fresh cache root (so a fresh TORCHINDUCTOR_CACHE_DIR), primed with the tokenizer
files only. Warm: the same root again, right after, so inductor's C++ and FX caches hold
what the cold run compiled. Both through ``harness run --python current``; prints each
suite's time (from the run manifest) and the whole run's wall time, side by side, and
the cold/warm ratio. CPU seconds are printed too: the machine may be shared.

    python bench/suite_time.py [--matrix cpu] [--repeats-warm 1]

Targets (issue 4): fusion + e2e under 10 min cold and under 4 min warm on a 2-core host.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("fusion", "e2e")


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(matrix: Path, reports: Path) -> tuple[float, float, dict[str, float]]:
    """(wall s, CPU s, {suite: s}) of one ``harness run`` of the suites."""
    argv = [
        sys.executable,
        "-m",
        "harness",
        "run",
        "--matrix",
        str(matrix),
        "--python",
        "current",
        "--reports",
        str(reports),
    ]
    for suite in SUITES:
        argv += ["--suite", suite]
    cpu0, start = _child_cpu(), time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - start, _child_cpu() - cpu0
    if done.returncode != 0:
        sys.exit(
            f"bench: harness run exited {done.returncode}:\n{done.stdout[-3000:]}"
            f"{done.stderr[-2000:]}"
        )
    manifests = sorted(reports.glob("*/*/manifest.json"), key=lambda p: p.stat().st_mtime)
    outcome = json.loads(manifests[-1].read_text())
    return wall, cpu, {s["suite"]: float(s["duration_s"]) for s in outcome["suites"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", default="cpu", help="shipped matrix to extend")
    parser.add_argument("--repeats-warm", type=int, default=1)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="harness-suite-time-"))
    matrix = work / "bench.yaml"
    # Same name, so the suites read the shipped golden and expectation files.
    matrix.write_text(
        f"extends: {args.matrix}.yaml\nname: {args.matrix}\ncaches: {{root: {work / 'cache'}}}\n"
    )
    subprocess.run(
        [sys.executable, "-m", "harness", "cache", "prime", "--matrix", str(matrix)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    rows = [("cold", *run(matrix, work / "reports"))]
    for i in range(args.repeats_warm):
        rows.append(
            (f"warm{i + 1}" if args.repeats_warm > 1 else "warm", *run(matrix, work / "reports"))
        )

    print(f"{'':8}" + "".join(f"{s:>10}" for s in SUITES) + f"{'run wall':>11}{'run cpu':>10}")
    for name, wall, cpu, suites in rows:
        print(
            f"{name:8}"
            + "".join(f"{suites.get(s, 0):>9.1f}s" for s in SUITES)
            + f"{wall:>10.1f}s{cpu:>9.1f}s"
        )
    cold, warm = rows[0][1], min(r[1] for r in rows[1:])
    print(
        f"cold/warm wall ratio {cold / warm:.2f}; targets: cold < 600 s "
        f"({'ok' if cold < 600 else 'MISSED'}), warm < 240 s "
        f"({'ok' if warm < 240 else 'MISSED'})"
    )
    print(f"(cache root {work / 'cache'}; delete when done)")


if __name__ == "__main__":
    main()
