"""Which tests truly depend on each of the engine's ops (issue 50): a lane run once per
knock-out group, each op of the group made to raise in torch's dispatcher
(``HARNESS_KNOCK_OUT``, harness/plugin/knockout.py), against one run without; the tests that
fail only under the knock-out depend on its ops, whatever path they call them by.

The op-based selection of issue 50 runs, for a changed op, the tests whose op record (the
``ops`` property, results/op_record.py) lists it. A test that depends on the op without its
record listing it is a false green of that selection; the rate is computed from this
bench's output by another script. The ops are every ``namespace::op`` key (refengine's own
namespace left out) in the op records of the lane's newest run in a history, one group
each (``--group-file``: a JSON ``{group name: [ops]}`` instead), plus the group
``unrecorded``: every op of the engine's surface in that run's device fingerprint
(``engine_ops``) that no record lists, which checks that the record missed no op.

    python bench/knockout_runs.py --matrix vllm-cpu --ops-from-history /tmp/lanes/history.sqlite \\
        --out /tmp/ko/ko.json [--group-file GROUPS.json] [--limit N] [--suite NAME ...]

Each run is ``harness run --matrix M --reports <scratch>/...``, planned from a copy of the
history (``HARNESS_HISTORY``: the run reads its estimates and memory needs from it and
writes nothing to the one given). Its cases are read from the run folder's suite JUnit files
with their sidecars (node ids as the history's ``tests.nodeid`` holds them, the
``knock_out_hits`` property). OUT is written after every run:

    {"lane", "host" (the CPU model), "history_run", "suites", "baseline": {node id: outcome},
     "baseline_seconds", "groups": {name: {"ops", "failed" (node ids failed or errored under
     the knock-out that did not in the baseline), "hits" ({op: the raiser's calls over the
     run}; 0: the knock-out never fired), "applied" (the ops some test process knocked out;
     one missing never loaded), "seconds", "exit", "run"}}}

Re-run with the same OUT, it resumes: the baseline and each group already there are kept
(a run that left no case or ended in an infrastructure error, exit 3, is not recorded: a
resume runs it again). Run it from a copy of the checkout where the code may change while
it runs (an hour for the vllm-cpu lane at about two minutes a run): each run uses the
harness and suites of the checkout the script is in.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.results import layout, op_record
from harness.results.junit_read import JunitReader

ROOT = Path(__file__).resolve().parents[1]
NOT_ENGINE = frozenset({"refengine"})  # refengine's own ops: the registry's, not the engine's
FAILING = frozenset({"failed", "error"})
UNRECORDED = "unrecorded"


def engine_op(key: str) -> bool:
    space = op_record.namespace(key)
    return bool(space) and space not in NOT_ENGINE


def newest_run(db: Path, lane: str) -> tuple[int, str, str]:
    """(id, fingerprint JSON, run folder) of the lane's newest run in the history."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT id, fingerprint, source FROM runs WHERE lane = ?"
                           " ORDER BY started DESC, id DESC LIMIT 1", (lane,)).fetchone()
    if row is None:
        sys.exit(f"{db}: no run of lane {lane}")
    return int(row[0]), str(row[1] or ""), str(row[2] or "")


def recorded_ops(db: Path, run: int) -> set[str]:
    """The engine's ops in the op records of the run's cases."""
    found: set[str] = set()
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        for (text,) in conn.execute(
                "SELECT json_extract(extra, '$.ops') FROM cases WHERE run = ?"
                " AND json_valid(extra) AND json_extract(extra, '$.ops') IS NOT NULL", (run,)):
            found.update(key for key in op_record.parse(str(text)) if engine_op(key))
    return found


def _mapping(value: object) -> Mapping[str, Any] | None:
    """A mapping stored as one, as JSON text or as a Python repr."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str):
        for parse in (json.loads, ast.literal_eval):
            try:
                found = parse(value)
            except (ValueError, SyntaxError):
                continue
            if isinstance(found, Mapping):
                return found
    return None


def surface_ops(fingerprint: str, folder: str) -> set[str]:
    """The engine's ops in its surface (``engine_ops``): the history's fingerprint, else the
    run folder's manifest."""
    outer = _mapping(fingerprint) or {}
    surface = _mapping(outer.get("engine_ops"))
    manifest = Path(folder) / layout.MANIFEST
    if surface is None and folder and manifest.is_file():
        device = _mapping(json.loads(manifest.read_text()).get("device_fingerprint")) or {}
        surface = _mapping(device.get("engine_ops"))
    if surface is None:
        sys.exit("the lane's newest run records no engine_ops: no surface to compare with")
    # an overload's key (``vllm_ir::fused_add_rms_norm.maybe_inplace``) names its op, as the
    # record does; the knock-out replaces every overload of an op
    return {str(key).partition(".")[0] for key in surface if engine_op(str(key))}


def plan_groups(recorded: set[str], surface: set[str],
                group_file: Path | None) -> dict[str, list[str]]:
    if group_file is not None:
        given = json.loads(group_file.read_text())
        groups = {str(name): sorted(map(str, ops)) for name, ops in given.items()}
    else:
        groups = {op: [op] for op in sorted(recorded)}
    unrecorded = sorted(surface - recorded)
    if unrecorded and UNRECORDED not in groups:
        groups[UNRECORDED] = unrecorded
    return groups


def host_cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return "unknown"


def run_lane(args: argparse.Namespace, scratch: Path, name: str,
             ops: list[str]) -> tuple[Path | None, int, float]:
    """One ``harness run`` of the lane with ``ops`` knocked out: (its run folder, its exit
    code, its wall seconds)."""
    reports = scratch / "runs" / re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    shutil.rmtree(reports, ignore_errors=True)  # an interrupted attempt's
    reports.mkdir(parents=True)
    env = dict(os.environ, HARNESS_HISTORY=str(scratch / "h.sqlite"))
    env.pop("HARNESS_KNOCK_OUT", None)
    if ops:
        env["HARNESS_KNOCK_OUT"] = ",".join(ops)
    argv = [sys.executable, "-m", "harness", "run", "--matrix", args.matrix, "--reports",
            str(reports), *(a for s in args.suite for a in ("--suite", s))]
    start = time.monotonic()
    with (scratch / "runs" / f"{reports.name}.log").open("w") as log:
        done = subprocess.run(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                              check=False)
    wall = time.monotonic() - start
    folders = sorted(p for p in reports.glob("*/*") if (p / layout.MANIFEST).is_file())
    return (folders[-1] if folders else None), done.returncode, wall


def read_cases(folder: Path | None) -> tuple[dict[str, str], dict[str, int], set[str]]:
    """(node id -> outcome, op -> the raiser's calls, the ops knocked out) of a run."""
    outcomes: dict[str, str] = {}
    hits: dict[str, int] = {}
    applied: set[str] = set()
    if folder is None:
        return outcomes, hits, applied
    for junit in layout.junit_files(folder):
        for case in JunitReader(junit, lambda line: print(f"  {line}", file=sys.stderr)):
            outcomes[case.nodeid] = case.status
            for op, count in op_record.parse(case.properties.get("knock_out_hits", "")).items():
                hits[op] = hits.get(op, 0) + count
            applied.update(filter(None, case.properties.get("knocked_out", "").split(",")))
    return outcomes, hits, applied


def write(out: Path, result: dict[str, Any]) -> None:
    part = out.with_name(out.name + ".part")
    part.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")
    part.replace(out)


def start(args: argparse.Namespace, scratch: Path) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The output so far (resumed, or begun) and the groups to run."""
    run, fingerprint, folder = newest_run(args.ops_from_history, args.matrix)
    recorded = recorded_ops(args.ops_from_history, run)
    groups = plan_groups(recorded, surface_ops(fingerprint, folder), args.group_file)
    begun: dict[str, Any] = {"lane": args.matrix, "host": host_cpu(), "history_run": run,
             "suites": args.suite, "baseline": None, "baseline_seconds": None, "groups": {}}
    result = json.loads(args.out.read_text()) if args.out.is_file() else begun
    if (result.get("lane"), result.get("suites")) != (args.matrix, args.suite):
        sys.exit(f"{args.out} is of lane {result.get('lane')} suites {result.get('suites')}: "
                 "another --out, or the same --matrix and --suite, to resume it")
    if not (scratch / "h.sqlite").is_file():  # the runs' plan: a copy, never the one given
        scratch.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(f"file:{args.ops_from_history}?mode=ro", uri=True) as src, \
                sqlite3.connect(scratch / "h.sqlite") as dst:
            src.backup(dst)
    print(f"knock-out: lane {args.matrix}, history run {run}: {len(recorded)} ops recorded, "
          f"{len(groups.get(UNRECORDED, []))} of the surface unrecorded; {len(groups)} groups",
          flush=True)
    return result, groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", default="vllm-cpu")
    parser.add_argument("--ops-from-history", type=Path, required=True, metavar="DB")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--group-file", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="run only the first N groups")
    parser.add_argument("--suite", action="append", default=[],
                        help="only this suite of the lane (repeatable)")
    parser.add_argument("--scratch", type=Path, default=None,
                        help="run folders and logs (default: OUT's name + .runs)")
    args = parser.parse_args()
    scratch = args.scratch or args.out.with_name(args.out.stem + ".runs")
    result, groups = start(args, scratch)
    baseline: dict[str, str] | None = result["baseline"]
    if baseline is None:
        folder, code, wall = run_lane(args, scratch, "baseline", [])
        baseline, _, _ = read_cases(folder)
        if not baseline:
            sys.exit(f"baseline: no cases (exit {code}, run folder {folder})")
        result["baseline"], result["baseline_seconds"] = baseline, round(wall, 1)
        write(args.out, result)
        print(f"baseline: {len(baseline)} tests, exit {code}, {wall:.0f} s ({folder})",
              flush=True)
    chosen = list(groups.items())[:args.limit]
    for i, (name, ops) in enumerate(chosen, 1):
        if name in result["groups"]:
            continue
        folder, code, wall = run_lane(args, scratch, name, ops)
        outcomes, hits, applied = read_cases(folder)
        if not outcomes or code == 3:  # the harness or a suite's start failed (exit 3, an
            # infrastructure error: a suite without JUnit): left for a resume to run again
            print(f"[{i}/{len(chosen)}] {name}: no cases (exit {code}, run folder {folder});"
                  " not recorded", flush=True)
            continue
        failed = sorted(n for n, s in outcomes.items()
                        if s in FAILING and baseline.get(n) not in FAILING)
        result["groups"][name] = {
            "ops": ops, "failed": failed, "hits": {op: hits.get(op, 0) for op in ops},
            "applied": sorted(applied), "seconds": round(wall, 1), "exit": code,
            "run": str(folder) if folder else None}
        write(args.out, result)
        print(f"[{i}/{len(chosen)}] {name}: {len(failed)} newly failing, "
              f"{sum(hits.values())} hits, {len(applied)}/{len(ops)} ops knocked out, "
              f"exit {code}, {wall:.0f} s", flush=True)
    print(f"knock-out: {len(result['groups'])} groups in {args.out}", flush=True)


if __name__ == "__main__":
    main()
