"""``harness report nightly``: the coverage report from the history database;
``harness report compare``: what changed between two run folders."""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
from pathlib import Path

from harness.errors import UsageError
from harness.results.speed import MARGIN

_SPAN = re.compile(r"(\d+)([dhw])")
_UNITS = {"d": "days", "h": "hours", "w": "weeks"}


def parse_since(text: str, now: dt.datetime) -> dt.timedelta:
    """``14d``, ``36h``, ``2w``, or a date (``2026-11-01``) the window starts at."""
    match = _SPAN.fullmatch(text.strip())
    if match:
        try:
            span = dt.timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
            now - span  # the window must start at a representable date
        except OverflowError:
            raise UsageError(f"--since {text!r} reaches before year 1; "
                             "use a span of at most a few thousand years") from None
        return span
    try:
        start = dt.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--since {text!r}: expected e.g. 14d, 36h, 2w or 2026-11-01") from None
    if start.tzinfo is None:
        start = start.replace(tzinfo=dt.UTC)
    if start > now:
        raise UsageError(f"--since {text!r} is in the future")
    return now - start


class _DeprecatedHistory(argparse.Action):
    """``report nightly --history``: the old name of ``--db``, still read, with a note."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print("harness: report nightly --history is deprecated: use --db (the name "
              "`harness history ingest` uses)", file=sys.stderr)
        namespace.db = values


def _nightly(args: argparse.Namespace) -> int:
    now = dt.datetime.now(dt.UTC)
    since = parse_since(args.since, now)
    from harness.history.schema import default_db_path
    from harness.reports import build_report, write_reports

    db = Path(args.db) if args.db else default_db_path()
    report = build_report(
        db,
        since=since,
        now=now,
        matrices=Path(args.matrices) if args.matrices else None,
        warn=lambda line: print(f"harness: warning: {line}", file=sys.stderr),
    )
    paths = write_reports(report, Path(args.out), html_url=args.link)
    print(report.headline)
    for path in paths.values():
        print(f"wrote {path}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from harness.reports.compare import DEFAULT_SPEED_MARGIN, compare_folders
    from harness.reports.compare_render import to_json, to_markdown
    from harness.results.speed import factor

    if not 0 <= args.min_change < 1:
        raise UsageError(f"--min-headroom-change {args.min_change:g}: expected a fraction in "
                         "[0, 1), e.g. 0.1")
    margin = DEFAULT_SPEED_MARGIN if args.speed_margin is None else factor(
        args.speed_margin, "--speed-margin")
    comparison = compare_folders(
        Path(args.run_a), Path(args.run_b),
        lambda line: print(f"harness: warning: {line}", file=sys.stderr),
        min_change=args.min_change, speed_margin=margin)
    rendered = to_json(comparison) if args.format == "json" else to_markdown(comparison)
    if args.out is None:
        sys.stdout.write(rendered)
        return 0
    try:
        Path(args.out).write_text(rendered, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"--out {args.out}: cannot write ({error.strerror})") from None
    print(f"wrote {args.out}")
    return 0


def _add_compare(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compare = sub.add_parser(
        "compare", help="what changed between two run folders of a lane",
        description="The tests whose outcome, failure signature, headroom or speed changed "
        "from RUN_A to RUN_B, the known failures that came or went, the tests only one run "
        "has, and the pins of each run's environment (docs/compare.md).")
    compare.add_argument("run_a", metavar="RUN_A", help="the run before (a run folder)")
    compare.add_argument("run_b", metavar="RUN_B", help="the run after (a run folder)")
    compare.add_argument("--format", choices=("md", "json"), default="md",
                         help="Markdown (default) or JSON")
    compare.add_argument("--out", metavar="FILE", help="write it here (default: stdout)")
    compare.add_argument("--min-headroom-change", dest="min_change", type=float, default=0.1,
                         metavar="FRACTION",
                         help="a headroom counts as changed when it moved by more than this "
                         "fraction of the larger value (default 0.1)")
    compare.add_argument("--speed-margin", metavar="FACTOR",
                         help="a case's speed ratio counts as changed when it moved by this "
                         f"factor or more, either way (above 1; default {1 + MARGIN:g})")
    compare.set_defaults(func=_compare)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("report", help="reports from the history and run folders")
    sub = parser.add_subparsers(dest="report_command", metavar="KIND", required=True)
    nightly = sub.add_parser("nightly", help="coverage report: HTML, Markdown and JSON")
    nightly.add_argument(
        "--db",
        metavar="PATH",
        help="history database, as `harness history ingest --db` names it "
        "(default: $HARNESS_HISTORY or reports/history.sqlite)",
    )
    nightly.add_argument("--history", metavar="PATH", action=_DeprecatedHistory,
                         help=argparse.SUPPRESS)
    nightly.add_argument(
        "--since",
        default="14d",
        metavar="SPAN",
        help="window: 14d, 36h, 2w or a start date (default 14d)",
    )
    nightly.add_argument(
        "--matrices",
        metavar="DIR",
        help="matrices folder for platforms with no run (default: the checkout's)",
    )
    nightly.add_argument("--out", required=True, metavar="DIR")
    nightly.add_argument(
        "--link",
        metavar="URL",
        help="where report.md's links point: report.html's URL once published "
        "(default: report.html beside report.md)",
    )
    nightly.set_defaults(func=_nightly)
    _add_compare(sub)
