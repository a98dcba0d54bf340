"""``harness bisect``: where a test's outcome (or, with ``--slower-than``, its speed)
changes, over engine releases or commits."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bisect",
        help="find the first engine release or commit where a test's outcome changes",
        description="Run one test of a matrix under each of several pins of its engine "
        "(--pins: each pin its own environment, built once and shared) or over the commits "
        "of an engine checkout (--commits GOOD..BAD: a binary search, as git bisect run), "
        "and print where its outcome changes. Exit 0 when a change was found, 1 when none, "
        "2 for bad input, 3 when a step could not be judged where it matters: a pin could "
        "not be installed (never counted as bad), or only unjudged steps are left between "
        "the last good and the first bad one (each of them named). With --slower-than "
        "FACTOR a step is judged by the speed the test records (a kernel_parity speed-tier "
        "case's engine-over-baseline ratio): bad from FACTOR times the GOOD end's ratio.",
    )
    p.add_argument("--matrix", default="cpu", help="matrix name or YAML path (default: cpu)")
    p.add_argument("--test", required=True, metavar="ID",
                   help="the node id (path::name[params]) of the test to judge")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--pins", metavar="NAME==V1,V2,...|NAME==FIRST..LAST",
                      help="the engine releases to try, oldest first (a range asks the "
                      "package index which releases it has)")
    what.add_argument("--commits", metavar="GOOD..BAD",
                      help="the commits of --repo to search (GOOD passes, BAD fails)")
    p.add_argument("--repo", type=Path, default=None, metavar="DIR",
                   help="the engine checkout for --commits (default: this project)")
    p.add_argument("--slower-than", metavar="FACTOR",
                   help="judge each step by the test's speed: bad where its ratio is at least "
                   "FACTOR (1.5, or 1.5x) times the GOOD end's; a step whose test did not "
                   "pass or recorded no speed is unrun")
    p.add_argument("--python", default="matrix", metavar="matrix|current|PATH",
                   help="interpreter of each run (default: the matrix's environment)")
    p.add_argument("--reports", type=Path, metavar="DIR",
                   help="reports folder (default: reports/); the steps go to bisect/<id>/")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness.bisect.run import bisect_commits, bisect_pins, walk_in
    from harness.results.speed import factor
    from harness.roots import project_root

    slower = None if args.slower_than is None else factor(args.slower_than)
    root = project_root()
    if args.pins:
        from harness.bisect.pinlist import expand

        pins = expand(args.pins)
        return walk_in(args.reports, root, lambda work: bisect_pins(
            args.matrix, args.test, pins, python=args.python, root=root, work=work,
            slower=slower))
    if args.python != "matrix" and args.python != "current" and not Path(args.python).exists():
        from harness.errors import UsageError

        raise UsageError(f"--python {args.python}: no such interpreter")
    from harness.bisect.commits import commits_between

    repo = (args.repo or root).resolve()
    good, shas = commits_between(repo, args.commits)
    return walk_in(args.reports, root, lambda work: bisect_commits(
        args.matrix, args.test, repo, good, shas, python=args.python, work=work,
        slower=slower))
