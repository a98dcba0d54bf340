"""`harness ci pipeline | check-clean | durations`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("ci", help="CI pipelines, checkout hygiene, shard durations")
    sub = parser.add_subparsers(dest="ci_command", metavar="ACTION", required=True)

    pipeline = sub.add_parser(
        "pipeline", help="print a Buildkite or GitHub Actions pipeline: one step per "
                         "matrix x shard, plus the nightly report")
    pipeline.add_argument("--provider", required=True, choices=("buildkite", "github"))
    pipeline.add_argument("--nightly", action="store_true",
                          help="only matrices with ci.nightly, then the nightly report job")
    pipeline.add_argument("--matrices", metavar="A,B", default="",
                          help="these matrices, in this order (default: all)")
    pipeline.add_argument("--template", metavar="FILE", type=Path,
                          help="default: ci/templates/<provider>.yml in the checkout")
    pipeline.add_argument("--report-queue", metavar="QUEUE",
                          help="agent queue / runner label of the nightly report job")
    pipeline.add_argument("--out", metavar="FILE", type=Path, help="write here, not stdout")
    pipeline.add_argument("--changed-since", metavar="REF",
                          help="a pull-request pipeline: only the lanes the change since REF "
                               "affects, each step running only the affected tests")
    pipeline.add_argument("--db", type=Path,
                          help="history database that sizes the shards of a --changed-since "
                               "pipeline (default: the history database)")
    pipeline.set_defaults(func=cmd_pipeline)

    clean = sub.add_parser("check-clean",
                           help="exit 1 if the checkout has modified, staged or untracked "
                                "files (mode changes ignored); 3 if git fails")
    clean.add_argument("path", nargs="?", type=Path, default=Path("."))
    clean.set_defaults(func=cmd_check_clean)

    durations = sub.add_parser(
        "durations", help="write the shard durations file of a matrix from the history")
    durations.add_argument("--matrix", required=True,
                           help="history lane: the matrix name, or 'NAME (emulated)'")
    durations.add_argument("--db", type=Path, help="default: the history database")
    durations.add_argument("--last-runs", type=int, default=10, metavar="N",
                           help="median over each lane's last N runs (default 10)")
    durations.add_argument("--out", type=Path, required=True, metavar="FILE")
    durations.set_defaults(func=cmd_durations)


def cmd_pipeline(args: argparse.Namespace) -> int:
    from harness.ci.pipeline import generate
    from harness.ci.targets import targets_from_matrices
    from harness.matrix import repo_root
    from harness.roots import locate

    root = repo_root()
    wanted = [name.strip() for name in args.matrices.split(",") if name.strip()]
    targets = targets_from_matrices(root, wanted, nightly=args.nightly)
    template = args.template or locate(f"ci/templates/{args.provider}.yml", root)
    shown = (f"ci/templates/{args.provider}.yml" if args.template is None
             else str(args.template))
    notes: list[str] = []
    if args.changed_since:
        from harness.ci.changed import history_durations, pr_targets
        from harness.history import default_db_path
        from harness.select import select_changes

        selection = select_changes(root, args.changed_since,
                                   matrices=[t.matrix for t in targets])
        targets, notes = pr_targets(targets, selection,
                                    history_durations(args.db or default_db_path()))
        for line in notes:
            print(f"harness: {line}", file=sys.stderr)
    text = generate(targets, args.provider, template, nightly=args.nightly,
                    report_queue=args.report_queue, shown_template=shown,
                    changed=bool(args.changed_since), notes=notes)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        steps = sum(t.shards for t in targets)
        print(f"wrote {args.out}: {len(targets)} matrices, {steps} test steps"
              + (", nightly report" if args.nightly else ""))
    return 0


def cmd_check_clean(args: argparse.Namespace) -> int:
    from harness.ci.clean import dirty_paths

    dirty = dirty_paths(args.path)
    if not dirty:
        print(f"{args.path}: clean")
        return 0
    for line in dirty:
        print(line)
    # Exit 1, not an error class: a dirty tree is the answer asked for, not a failure.
    print(f"harness: {args.path}: checkout is dirty ({len(dirty)} paths)", file=sys.stderr)
    return 1


def cmd_durations(args: argparse.Namespace) -> int:
    from harness.history import default_db_path
    from harness.shard.durations import dump, durations_for

    found = durations_for(args.matrix, args.db or default_db_path(), last_runs=args.last_runs)
    dump(found, args.out)
    print(f"wrote {args.out}: {len(found.durations)} tests timed on {args.matrix}, "
          f"{len(found.siblings)} sibling lanes")
    return 0
