"""Scale check of history ingest and the nightly report, beside junitparser merging.

Writes a synthetic history (default 1,000,000 test cases: 30 nights x 6 matrices x 3
suites, as run folders with manifest.json and junit/*.xml) into a temporary folder,
then measures in separate child processes, one after the other:

  ingest   harness.history.ingest_paths over all run folders (with the parse
           workers it picks by size and idle CPUs, and again into a second database
           with the other choice: none, or two)
  report   build_report + write_reports for the last 14 days
  merge    junitparser: read every JUnit file and merge into one, then write it

Each child reports its wall time, its CPU time and its peak RSS, counting the
processes it started (ingest's JUnit parse workers). Targets: ingest < 20 s,
report < 10 s, peak memory < 1 GB.

    python bench/report_scale.py [--cases 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MATRICES = ("cpu", "cuda", "rocm", "xpu", "s390x", "zen")
SUITES = ("kernel_parity", "fusion", "e2e")
NIGHTS = 30


def write_history(root: Path, total: int, now: dt.datetime) -> int:
    per_run = total // (NIGHTS * len(MATRICES))
    per_suite = per_run // len(SUITES)
    rng = random.Random(7)
    written = 0
    for night in range(NIGHTS):
        started = now - dt.timedelta(days=NIGHTS - night, hours=-2)
        for matrix in MATRICES:
            device = "cpu" if matrix in ("cpu", "s390x", "zen") else f"{matrix}:0"
            run_id = f"{started:%Y%m%dT%H%M%SZ}-{matrix}"
            folder = root / matrix / run_id
            (folder / "junit").mkdir(parents=True)
            hang = rng.random() < 0.02
            outcomes = []
            for suite in SUITES:
                lines = [
                    '<?xml version="1.0" encoding="utf-8"?>\n<testsuites>'
                    f'<testsuite name="pytest" tests="{per_suite}">'
                    f'<properties><property name="matrix" value="{matrix}"/></properties>'
                ]
                for i in range(per_suite):
                    dtype = ("float32", "bfloat16", "float16")[i % 3]
                    name = f"test_{suite}_{i // 3}[{device}-{dtype}]"
                    roll = rng.random()
                    props = ""
                    if suite == "kernel_parity":
                        head = rng.random()
                        props = (
                            "<properties>"
                            f'<property name="op" value="op{i % 40}"/>'
                            f'<property name="provider" value="native"/>'
                            f'<property name="dtype" value="{dtype}"/>'
                            f'<property name="max_abs_err" value="{head * 1e-3:.3g}"/>'
                            f'<property name="atol" value="0.001"/>'
                            f'<property name="headroom" value="{head:.3f}"/>'
                            f'<property name="requires" value="triton"/>'
                            "</properties>"
                        )
                    elif suite == "fusion" and i % 50 == 0:
                        found = 2 if rng.random() > 0.1 else 1
                        props = (
                            "<properties>"
                            '<property name="fusion.add_rms_norm.expected" value="2"/>'
                            f'<property name="fusion.add_rms_norm.found" value="{found}"/>'
                            "</properties>"
                        )
                    if roll < 0.01:
                        body = f'{props}<failure message="mismatch {i}">trace</failure>'
                    elif roll < 0.06:
                        body = f'{props}<skipped type="pytest.skip" message="needs fp8"/>'
                    else:
                        body = props
                    lines.append(
                        f'<testcase classname="suites.{suite}.test_{suite}" '
                        f'name="{name}" file="suites/{suite}/test_{suite}.py" '
                        f'time="{rng.random() / 10:.4f}">{body}</testcase>'
                    )
                    written += 1
                lines.append("</testsuite></testsuites>\n")
                (folder / "junit" / f"{suite}.xml").write_text("".join(lines))
                status = "crashed" if hang and suite == "e2e" else "failed"
                outcomes.append(
                    {
                        "suite": suite,
                        "status": status,
                        "exit_code": 134 if status == "crashed" else 1,
                    }
                )
            manifest = {
                "schema": 1,
                "run_id": run_id,
                "matrix": {"name": matrix},
                "platform": matrix,
                "started": started.isoformat(),
                "status": "done",
                "suites": outcomes,
                "infra_error": {"kind": "gpu_hang", "message": "exit 134"} if hang else None,
            }
            (folder / "manifest.json").write_text(json.dumps(manifest))
    return written


CHILD = r"""
import json, resource, sys, time, datetime as dt
from pathlib import Path
phase, data, db, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
start = time.perf_counter()
workers = 0
if phase.startswith("ingest"):
    from harness.history import ingest_paths
    from harness.history.parse_pool import default_workers
    workers = default_workers(sorted(data.rglob("junit/*.xml")))
    if phase == "ingest-other":  # the other choice, to compare against
        workers = 0 if workers else 2
    result = ingest_paths(
        db, [data], lambda line: print(line, file=sys.stderr), workers=workers
    )
    detail = f"{len(result.added)} runs, {result.cases} cases, {workers} parse workers"
elif phase == "report":
    from harness.reports import build_report, write_reports
    report = build_report(db, since=dt.timedelta(days=14), declared=False)
    write_reports(report, out)
    detail = report.headline
else:
    from junitparser import JUnitXml
    merged = JUnitXml()
    files = sorted(data.rglob("junit/*.xml"))
    for path in files:
        merged += JUnitXml.fromfile(str(path))
    merged.write(str(out / "merged.xml"))
    detail = f"{len(files)} files"
elapsed = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
# Parse workers run beside the writer: count their CPU, and their memory as if all
# peaked at once (the children's figure is the largest one's).
peak = (usage.ru_maxrss + workers * kids.ru_maxrss) / 1024
cpu = usage.ru_utime + usage.ru_stime + kids.ru_utime + kids.ru_stime
print(json.dumps({"seconds": elapsed, "cpu_s": cpu, "peak_mb": peak, "detail": detail}))
"""


def measure(phase: str, data: Path, db: Path, out: Path, timeout: int) -> dict[str, object]:
    try:
        result = subprocess.run(
            [sys.executable, "-c", CHILD, phase, str(data), str(db), str(out)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {
            "seconds": float(timeout),
            "cpu_s": float("nan"),
            "peak_mb": float("nan"),
            "detail": f"did not finish in {timeout} s",
        }
    if result.returncode != 0:
        return {
            "seconds": float("nan"),
            "cpu_s": float("nan"),
            "peak_mb": float("nan"),
            "detail": "failed: " + result.stderr.strip().splitlines()[-1],
        }
    parsed: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="write here and keep it")
    parser.add_argument("--merge-timeout", type=int, default=300)
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="harness-report-scale-"))
    try:
        data, out = work / "reports", work / "out"
        out.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        cases = write_history(data, args.cases, dt.datetime.now(dt.UTC))
        print(
            f"wrote {cases} cases in {NIGHTS * len(MATRICES)} runs "
            f"({time.perf_counter() - start:.1f} s)"
        )
        db = work / "history.sqlite"
        # The same ingest again into a second database, with the other choice of parse
        # workers (none if the default used some, else two): what they buy in wall
        # time and cost in CPU time, side by side.
        other = measure("ingest-other", data, work / "other.sqlite", out, 600)
        rows = [
            ("ingest (harness.history)", measure("ingest", data, db, out, 600), 20.0),
            ("ingest, other worker count", other, 20.0),
            ("report (14 days)", measure("report", data, db, out, 600), 10.0),
            ("merge (junitparser)", measure("merge", data, db, out, args.merge_timeout), None),
        ]
        # CPU seconds beside wall seconds: on a shared machine the wall clock also
        # measures the neighbours.
        print(f"{'phase':<26} {'seconds':>9} {'cpu s':>7} {'peak MB':>9}  target   detail")
        for name, got, target in rows:
            goal = f"< {target:.0f} s" if target else "-"
            print(
                f"{name:<26} {got['seconds']:>9.2f} {got['cpu_s']:>7.1f} "
                f"{got['peak_mb']:>9.0f}  {goal:<8} {got['detail']}"
            )
        ingest, merge = rows[0][1], rows[3][1]
        ratio = float(merge["seconds"]) / float(ingest["seconds"])  # type: ignore[arg-type]
        print(
            f"junitparser merge / harness ingest time: "
            f"{'>= ' if 'did not finish' in str(merge['detail']) else ''}{ratio:.2f}x; "
            f"database {db.stat().st_size / 1e6:.0f} MB; "
            f"report.html {(out / 'report.html').stat().st_size / 1e6:.1f} MB"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
