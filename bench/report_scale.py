"""Scale check of history ingest and the nightly report, beside junitparser merging.

Two synthetic histories, each written into a temporary folder as run folders
(manifest.json and junit/*.xml):

  many   1,000,000 test cases: 30 nights x 6 matrices x 3 suites (issue 16)
  huge   one run whose one JUnit file holds one <testsuite> of 621,000 parity cases,
         about 76 MB, with a 232 MB sidecar (420 MB of JUnit when the properties were
         in it; issue 12: memory must be bounded per case, not per testsuite)

Every case is written as ``harness run`` writes it: a plain xunit2 ``<testcase>``
(classname, name, time, its result) in junit/<suite>.xml, and its node id and the
properties the harness plugin records (``case_properties``) in the sidecar beside it,
junit/<suite>.partial.jsonl, through the plugin's own line writer (``result_line``).

then measures in separate child processes, one after the other:

  ingest   harness.history.ingest_paths over all run folders (with the parse
           workers it picks by size and idle CPUs, and for ``many`` again into a
           second database with the other choice: none, or two)
  report   build_report + write_reports for the last 14 days
  merge    junitparser: read every JUnit file and merge into one, then write it
           (``many`` only)

Each child reports its wall time, its CPU time and its peak RSS, counting the
processes it started (ingest's JUnit parse workers). Each row prints beside its
target and the ratio measured / target (at most 1.00 meets it). The machine is
shared: the load average before each phase is printed with it; ``--repeat N``
measures each phase N times and prints the median (and the spread).

    python bench/report_scale.py [--case many|huge|both] [--cases 1000000]
        [--huge-cases 621000] [--repeat 1] [--keep DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.results.sidecar import address, result_line

MATRICES = ("cpu", "cuda", "rocm", "xpu", "s390x", "zen")
SUITES = ("kernel_parity", "fusion", "e2e")
NIGHTS = 30


def case_properties(suite: str, i: int, dtype: str, rng: random.Random) -> list[tuple[str, str]]:
    """A test case's properties, as the harness plugin records them: none on most cases
    (the matrix is its testsuite's); on a parity case the op, provider, dtype and its numbers
    (suites/kernel_parity/test_parity.py) and its op record (plugin/ops.py: the provider's
    kernel it ran), and on every 4th the speed tier's timing (suites/kernel_parity/
    parity_speed.py: one case per op, provider and dtype) or, on every 20th, why it has none;
    on every 50th fusion case two pattern
    counts; on every 50th case the test process's peak memory (plugin/memory.py records it
    where a test raises its file's peak in its process). tests/integration/test_nightly_day.py
    checks the names against the real runs of a nightly day."""
    props: list[tuple[str, str]] = []
    if suite == "kernel_parity":
        head = rng.random()
        props += [
            ("op", f"op{i % 40}"), ("provider", "native"), ("dtype", dtype),
            ("max_abs_err", f"{head * 1e-3:.6g}"), ("max_rel_err", f"{head * 1e-2:.6g}"),
            ("atol", "0.001"), ("rtol", "0.016"), ("headroom", f"{head:.4g}"),
        ]  # fmt: skip
        if i % 4 == 0:  # the speed tier's case of its op, provider and dtype
            ratio = 0.5 + rng.random()
            props += [
                ("speed_ratio", f"{ratio:.4g}"), ("speed_engine_us", f"{ratio * 20:.4g}"),
                ("speed_baseline_us", "20"), ("speed_spread", f"{rng.random() / 10:.3g}"),
                ("speed_baseline", "native"), ("speed_pairs", "401"),
            ]  # fmt: skip
        elif i % 20 == 2:  # ... or why it has none (an interpreted Triton kernel)
            props.append(("speed_skipped", "Triton runs in its interpreter here: its time is "
                                           "the interpreter's"))
        props.append(("ops", f"native/op{i % 40}=2"))  # its op record: the kernel it ran
    elif suite == "fusion" and i % 50 == 0:
        found = 2 if rng.random() > 0.1 else 1
        props += [("fusion.add_rms_norm.expected", "2"), ("fusion.add_rms_norm.found", str(found))]
    if i % 50 == 0:  # the cases that raise their file's peak memory in their process
        props.append(("peak_rss_mb", f"{400 + rng.random() * 800:.1f}"))
    if i % 10 == 0:  # the cases that took their process 10 MB or more above its start
        props.append(("rss_growth_mb", f"{10 + rng.random() * 200:.1f}"))
    return props


def write_case(
    nodeid: str, seconds: float, roll: float, i: int, props: list[tuple[str, str]]
) -> tuple[str, str]:
    """(the <testcase> element, the sidecar line) of one case, as harness run writes them."""
    classname, name = address(nodeid)
    outcome, message, body = "passed", "", ""
    if roll < 0.01:
        outcome, message = "failed", f"mismatch {i}"
        body = f'<failure message="{message}">trace</failure>'
    elif roll < 0.06:
        outcome, message = "skipped", "needs fp8"
        body = f'<skipped type="pytest.skip" message="{message}"/>'
    attrs = f'classname="{classname}" name="{name}" time="{seconds:.3f}"'
    case = f"<testcase {attrs}>{body}</testcase>" if body else f"<testcase {attrs} />"
    details = "trace" if outcome == "failed" else ""
    return case, result_line(nodeid, "call", outcome, seconds, message, props, details)


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
                sidecar = []
                for i in range(per_suite):
                    dtype = ("float32", "bfloat16", "float16")[i % 3]
                    name = f"test_{suite}_{i // 3}[{device}-{dtype}]"
                    nodeid = f"suites/{suite}/test_{suite}.py::{name}"
                    roll = rng.random()
                    props = case_properties(suite, i, dtype, rng)
                    case, line = write_case(nodeid, rng.random() / 10, roll, i, props)
                    lines.append(case)
                    sidecar.append(line)
                    written += 1
                lines.append("</testsuite></testsuites>\n")
                (folder / "junit" / f"{suite}.xml").write_text("".join(lines))
                (folder / "junit" / f"{suite}.partial.jsonl").write_text("".join(sidecar))
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


def write_huge(root: Path, total: int, now: dt.datetime) -> tuple[int, int]:
    """One run folder whose kernel_parity.xml is one <testsuite> of ``total`` cases,
    every name distinct (no id repeats to cache); returns (cases, bytes)."""
    rng = random.Random(11)
    run_id = f"{now - dt.timedelta(hours=3):%Y%m%dT%H%M%SZ}-cpu"
    folder = root / "cpu" / run_id
    (folder / "junit").mkdir(parents=True)
    path = folder / "junit" / "kernel_parity.xml"
    with path.open("w", encoding="utf-8") as out, \
            (folder / "junit" / "kernel_parity.partial.jsonl").open("w") as side:
        out.write(
            '<?xml version="1.0" encoding="utf-8"?>\n<testsuites>'
            f'<testsuite name="pytest" tests="{total}">'
            '<properties><property name="matrix" value="cpu"/></properties>'
        )
        chunk: list[str] = []
        lines: list[str] = []
        for i in range(total):
            dtype = ("float32", "bfloat16", "float16")[i % 3]
            name = f"test_parity[op{i % 40}-shape{i // 120}-{i // 3 % 40}-cpu-{dtype}]"
            nodeid = f"suites/kernel_parity/test_parity.py::{name}"
            props = case_properties("kernel_parity", i, dtype, rng)
            roll = rng.random()
            case, line = write_case(nodeid, rng.random() / 10, roll, i, props)
            chunk.append(case)
            lines.append(line)
            if len(chunk) >= 10_000:
                out.write("".join(chunk))
                side.write("".join(lines))
                chunk.clear()
                lines.clear()
        out.write("".join(chunk) + "</testsuite></testsuites>\n")
        side.write("".join(lines))
    manifest = {
        "schema": 1,
        "run_id": run_id,
        "matrix": {"name": "cpu"},
        "platform": "cpu",
        "started": (now - dt.timedelta(hours=3)).isoformat(),
        "status": "done",
        "suites": [{"suite": "kernel_parity", "status": "failed", "exit_code": 1}],
        "infra_error": None,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return total, path.stat().st_size


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


def measure(phase: str, data: Path, db: Path, out: Path, timeout: int) -> dict[str, Any]:
    load = os.getloadavg()[0]
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
            "load": load,
            "detail": f"did not finish in {timeout} s",
        }
    if result.returncode != 0:
        return {
            "seconds": float("nan"),
            "cpu_s": float("nan"),
            "peak_mb": float("nan"),
            "load": load,
            "detail": "failed: " + result.stderr.strip().splitlines()[-1],
        }
    parsed: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    parsed["load"] = load
    return parsed


def repeated(
    phase: str, data: Path, db: Path, out: Path, timeout: int, repeat: int
) -> dict[str, Any]:
    """The phase ``repeat`` times (a fresh database for each ingest); the median run by
    wall time, with the spread of the wall times beside it."""
    got = []
    for _ in range(repeat):
        if phase.startswith("ingest"):
            for stale in db.parent.glob(db.name + "*"):
                stale.unlink()
        got.append(measure(phase, data, db, out, timeout))
    got.sort(key=lambda row: row["seconds"])
    middle = dict(got[len(got) // 2])
    if repeat > 1:
        seconds = [row["seconds"] for row in got]
        middle["spread"] = f"{min(seconds):.1f}-{max(seconds):.1f} s"
        middle["peak_mb"] = max(row["peak_mb"] for row in got)
    return middle


# (row name, phase, target seconds, target peak MB)
Row = tuple[str, dict[str, Any], float | None, float | None]


def print_rows(title: str, rows: list[Row]) -> None:
    print(f"\n{title}")
    print(
        f"{'phase':<28} {'seconds':>8} {'target':>7} {'ratio':>6} {'cpu s':>6} "
        f"{'peak MB':>8} {'target':>7} {'ratio':>6} {'load':>5}  detail"
    )
    for name, got, seconds, peak in rows:
        time_ratio = f"{got['seconds'] / seconds:.2f}" if seconds else "-"
        peak_ratio = f"{got['peak_mb'] / peak:.2f}" if peak else "-"
        detail = got["detail"] + (f"; median of {got['spread']}" if "spread" in got else "")
        print(
            f"{name:<28} {got['seconds']:>8.2f} {f'{seconds:.0f}' if seconds else '-':>7} "
            f"{time_ratio:>6} {got['cpu_s']:>6.1f} {got['peak_mb']:>8.0f} "
            f"{f'{peak:.0f}' if peak else '-':>7} {peak_ratio:>6} "
            f"{got['load']:>5.2f}  {detail}"
        )


def run_many(work: Path, args: argparse.Namespace) -> None:
    data, out = work / "many", work / "out-many"
    out.mkdir(parents=True, exist_ok=True)
    if not data.exists():
        start = time.perf_counter()
        cases = write_history(data, args.cases, dt.datetime.now(dt.UTC))
        print(
            f"many: wrote {cases} cases in {NIGHTS * len(MATRICES)} runs "
            f"({time.perf_counter() - start:.1f} s)"
        )
    db = work / "many.sqlite"
    # The same ingest again into a second database, with the other choice of parse
    # workers (none if the default used some, else two): what they buy in wall
    # time and cost in CPU time, side by side.
    rows: list[Row] = [
        ("ingest (harness.history)", repeated("ingest", data, db, out, 600, args.repeat),
         10.0, 500.0),
        ("ingest, other worker count",
         repeated("ingest-other", data, work / "other.sqlite", out, 600, args.repeat),
         10.0, 500.0),
        ("report (14 days)", repeated("report", data, db, out, 600, args.repeat), 3.0, 500.0),
        ("merge (junitparser)", measure("merge", data, db, out, args.merge_timeout),
         None, None),
    ]  # fmt: skip
    print_rows(f"many: {args.cases} cases, 180 runs (issue 16 targets)", rows)
    ingest, merge = rows[0][1], rows[3][1]
    ratio = float(merge["seconds"]) / float(ingest["seconds"])
    print(
        f"junitparser merge / harness ingest time: "
        f"{'>= ' if 'did not finish' in str(merge['detail']) else ''}{ratio:.2f}x; "
        f"database {db.stat().st_size / 1e6:.0f} MB; "
        f"report.html {(out / 'report.html').stat().st_size / 1e6:.1f} MB, "
        f"report.json {(out / 'report.json').stat().st_size / 1e6:.1f} MB"
    )


def run_huge(work: Path, args: argparse.Namespace) -> None:
    data, out = work / "huge", work / "out-huge"
    out.mkdir(parents=True, exist_ok=True)
    junit = sorted(data.rglob("junit/*.xml"))
    if not junit:
        start = time.perf_counter()
        cases, size = write_huge(data, args.huge_cases, dt.datetime.now(dt.UTC))
        print(
            f"huge: wrote {cases} cases in one testsuite, {size / 1e6:.0f} MB "
            f"({time.perf_counter() - start:.1f} s)"
        )
    db = work / "huge.sqlite"
    rows: list[Row] = [
        ("ingest (harness.history)", repeated("ingest", data, db, out, 600, args.repeat),
         None, 300.0),
        ("report (14 days)", repeated("report", data, db, out, 600, args.repeat), 10.0, 1000.0),
    ]  # fmt: skip
    print_rows(f"huge: {args.huge_cases} cases in one <testsuite> (issue 12 targets)", rows)
    print(
        f"report.html {(out / 'report.html').stat().st_size / 1e6:.1f} MB, "
        f"report.json {(out / 'report.json').stat().st_size / 1e6:.1f} MB"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=("many", "huge", "both"), default="both")
    parser.add_argument("--cases", type=int, default=1_000_000)
    parser.add_argument("--huge-cases", type=int, default=621_000)
    parser.add_argument("--repeat", type=int, default=1, help="median of this many runs")
    parser.add_argument("--keep", type=Path, help="write here and keep it (reused if there)")
    parser.add_argument("--merge-timeout", type=int, default=300)
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="harness-report-scale-"))
    try:
        loads = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"load average before: {loads}, {os.cpu_count()} CPUs")
        if args.case in ("many", "both"):
            run_many(work, args)
        if args.case in ("huge", "both"):
            run_huge(work, args)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
