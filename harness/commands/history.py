"""``harness history``: ingest run folders and JUnit files; list what is stored."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.results.case_meaning import NEW_FAILURES, sql


def _warn(line: str) -> None:
    print(f"harness: warning: {line}", file=sys.stderr)


def _ingest(args: argparse.Namespace) -> int:
    from harness.history.ingest import ingest_paths
    from harness.history.schema import default_db_path
    from harness.results.layout import Lane

    db = Path(args.db) if args.db else default_db_path()
    lane = Lane.parse(args.lane) if args.lane else None
    result = ingest_paths(db, [Path(p) for p in args.paths], _warn, lane=lane)
    print(
        f"ingested {len(result.added)} run(s), {result.cases} test case(s) into {db}"
        + (f"; {len(result.skipped)} already there" if result.skipped else "")
        + (f"; {len(result.failed)} could not be stored (see the warnings)" if result.failed
           else "")
    )
    return 0


def _ls(args: argparse.Namespace) -> int:
    from harness.history.schema import connect, default_db_path

    db_path = Path(args.db) if args.db else default_db_path()
    db = connect(db_path, create=False)
    try:
        where, params = (
            ("WHERE r.lane = ? OR r.matrix = ?", [args.matrix] * 2) if args.matrix else ("", [])
        )
        rows = db.execute(
            "SELECT r.run_key, r.lane, r.started, coalesce(r.status, ''),"
            " coalesce(r.infra_label, ''),"
            " (SELECT count(*) FROM cases c WHERE c.run = r.id),"
            " (SELECT count(*) FROM cases c WHERE c.run = r.id"
            f"  AND c.status IN {sql(NEW_FAILURES)})"
            f" FROM runs r {where} ORDER BY r.started DESC LIMIT ?",
            [*params, args.limit],
        ).fetchall()
    finally:
        db.close()
    print(f"{'started':<21} {'lane':<22} {'cases':>7} {'failed':>6} {'status':<8} run")
    for key, lane, started, status, label, cases, failed in rows:
        status_text = f"{status}[{label}]" if label else status
        print(f"{started:<21} {lane:<22} {cases:>7} {failed:>6} {status_text:<8} {key}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("history", help="the SQLite history of runs")
    sub = parser.add_subparsers(dest="history_command", metavar="ACTION", required=True)
    db_help = "history database (default: $HARNESS_HISTORY or reports/history.sqlite)"

    ingest = sub.add_parser("ingest", help="add run folders and JUnit files (idempotent)")
    ingest.add_argument("paths", nargs="+", metavar="DIR_OR_FILE")
    ingest.add_argument("--db", metavar="PATH", help=db_help)
    ingest.add_argument(
        "--lane",
        metavar="NAME",
        help="lane of loose JUnit files from other producers ('NAME' or 'NAME (emulated)'); "
        "default: the plugin's suite properties, else 'unknown'",
    )
    ingest.set_defaults(func=_ingest)

    ls = sub.add_parser("ls", help="list stored runs, newest first")
    ls.add_argument("--db", metavar="PATH", help=db_help)
    ls.add_argument("--matrix", metavar="NAME", help="only this matrix (or lane)")
    ls.add_argument("--limit", type=int, default=50, metavar="N")
    ls.set_defaults(func=_ls)
