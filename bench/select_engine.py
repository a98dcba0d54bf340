"""Selection from an engine source change (issue 50), measured on a lane's real record.

Two figures, over the lane's newest run in the history (``--db``) and the engine's sdist
(``--engine-source``, default: vLLM 0.32.0 through ci/vllm_upstream.py):

1. **The selected share of a one-file change**: for each file under ``csrc/cpu/`` (every
   one, headers and the registration file included, each changed as a whole), the part of
   the lane's tests ``harness select`` would run (a file the map cannot place: all of
   them). Prints the median and the worst, and the worst file's ops.
2. **The false-green rate**, from a knock-out bench's output (``--knockout``, written by
   bench/knockout_runs.py: per op, the tests that failed with that op's kernel replaced
   by one that raises, in the dispatcher, in the test process): for each op, the tests
   that failed but that a change to the op's source file (the file defining its function)
   does not select, over all the tests that failed; 0 is the goal. The ``unrecorded``
   group (every op of the engine the record never saw, knocked out at once) says whether
   the record missed an op: a test failing there is a false green of every selection.

    python bench/select_engine.py --db H.sqlite --lane vllm-cpu --knockout KO.json
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from harness.history.read import recent_op_tests  # noqa: E402
from harness.results.layout import Lane  # noqa: E402
from harness.select.engine_change import unpack  # noqa: E402
from harness.select.native import Reach, read_native  # noqa: E402


def lane_tests(db: Path, lane: str) -> set[str]:
    with sqlite3.connect(db) as conn:
        (run,) = conn.execute("SELECT id FROM runs WHERE lane = ? ORDER BY started DESC LIMIT 1",
                              (lane,)).fetchone()
        return {n for (n,) in conn.execute(
            "SELECT t.nodeid FROM cases c JOIN tests t ON t.id = c.test WHERE c.run = ?",
            (run,))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--lane", default="vllm-cpu")
    parser.add_argument("--engine-source", type=Path)
    parser.add_argument("--knockout", type=Path)
    args = parser.parse_args()
    if args.engine_source is None:
        from vllm_sources import upstream

        args.engine_source = upstream().sdist()
    tree = unpack(args.engine_source)
    native = read_native(tree)
    record = recent_op_tests(args.db, Lane.parse(args.lane))
    everything = lane_tests(args.db, args.lane)

    def selected(path: str) -> set[str]:
        reach = native.reach(path)
        if reach is None:
            return set(everything)
        return set().union(*(record.tests.get(r.op, frozenset()) for r in reach
                             if r.family == "cpu"))

    files = sorted(p.relative_to(tree).as_posix() for p in (tree / "csrc/cpu").rglob("*")
                   if p.is_file())
    shares = {path: len(selected(path)) / len(everything) for path in files}
    worst = max(shares, key=lambda p: (shares[p], p))
    reach = native.reach(worst)
    print(f"lane {args.lane}: {len(everything)} tests in its newest run, {record.runs} run(s) "
          f"with an op record; engine {tree.name}")
    print(f"one-file change under csrc/cpu/ ({len(files)} files): selected share median "
          f"{100 * statistics.median(shares.values()):.1f}%, worst "
          f"{100 * shares[worst]:.1f}% ({worst}: "
          f"{'unplaced' if reach is None else f'{len(reach)} ops'})")
    unplaced = [p for p in files if native.reach(p) is None]
    print(f"files the map cannot place (select all): {len(unplaced)} {unplaced}")
    for path in sorted(shares, key=lambda p: -shares[p])[:5]:
        print(f"  {100 * shares[path]:5.1f}%  {path}")
    if args.knockout:
        report_knockout(json.loads(args.knockout.read_text()), native, selected, everything)
    return 0


def report_knockout(data: dict, native, selected, everything) -> None:  # type: ignore[no-untyped-def]
    failed_total = missed_total = 0
    rows = []
    for name, group in sorted(data["groups"].items()):
        failed = set(group["failed"])
        if name == "unrecorded":
            print(f"unrecorded ops knocked out ({len(group['ops'])}): {len(failed)} tests "
                  f"failed {sorted(failed)[:5]}")
            missed_total += len(failed)
            failed_total += len(failed)
            continue
        (op,) = group["ops"]
        sources = native.sources.get(Reach("cpu", op), frozenset())
        if op not in native.ops:
            # an op the engine registers in Python (vllm::...): its source is a Python file
            # of the engine, which selects the whole lane (by_ops.py)
            sources, chosen = frozenset({"(a Python file: the whole lane)"}), set(everything)
        else:
            chosen = set().union(*(selected(s) for s in sources)) if sources else set()
        missed = failed - chosen
        failed_total += len(failed)
        missed_total += len(missed)
        hits = sum(group.get("hits", {}).values())
        rows.append((op, len(failed), len(missed), hits, sorted(sources)))
    print(f"{'op':45} {'failed':>6} {'missed':>6} {'hits':>6}  source")
    for op, failed, missed, hits, sources in rows:
        print(f"{op:45} {failed:6d} {missed:6d} {hits:6d}  {', '.join(sources)}")
    rate = missed_total / failed_total if failed_total else 0.0
    print(f"false-green rate: {missed_total}/{failed_total} = {rate:.3f} over {len(rows)} ops "
          f"(host: {data.get('host', '?')})")


if __name__ == "__main__":
    raise SystemExit(main())
