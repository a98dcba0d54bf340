"""`harness ci pipeline | select | check-clean | check-shards | durations`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.commands.select import add_engine_arguments, engine_options
from harness.errors import Exit, UsageError

if TYPE_CHECKING:
    from harness.ci.pipeline import Kind


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("ci", help="CI pipelines, checkout hygiene, shard durations")
    sub = parser.add_subparsers(dest="ci_command", metavar="ACTION", required=True)
    _register_pipeline(sub)

    select = sub.add_parser(
        "select", help="the lanes and shards of this build as GitHub's select job writes them "
                       "to $GITHUB_OUTPUT (matrix=, images=, any=, has_images=)")
    select.add_argument("--nightly", action="store_true", help="the matrices with ci.nightly")
    select.add_argument("--matrices", metavar="A,B", default="", help="these matrices only")
    select.add_argument("--changed-since", metavar="REF",
                        help="only the lanes the change since the merge base with REF affects")
    add_engine_arguments(select)
    select.add_argument("--no-self-hosted", action="store_true",
                        help="leave out the lanes on self-hosted runners (a fork's pull request)")
    select.add_argument("--durations-dir", type=Path, metavar="DIR",
                        help="also write DIR/<matrix>.json, the durations every shard reads")
    select.add_argument("--db", type=Path, help="default: the history database")
    select.set_defaults(func=cmd_select)

    clean = sub.add_parser("check-clean",
                           help="exit 1 if the checkout has modified, staged or untracked "
                                "files (mode changes ignored); 3 if git fails")
    clean.add_argument("path", nargs="?", type=Path, default=Path("."))
    clean.set_defaults(func=cmd_check_clean)

    shards = sub.add_parser("check-shards",
                            help="exit 3 unless the shards of each build under DIR planned "
                                 "alike (the same plan fingerprint per suite)")
    shards.add_argument("paths", nargs="+", type=Path, metavar="DIR")
    shards.set_defaults(func=cmd_check_shards)

    durations = sub.add_parser(
        "durations", help="write the shard durations file of a matrix from the history")
    durations.add_argument("--matrix", required=True, metavar="NAME[,NAME]",
                           help="history lane(s): the matrix name, or 'NAME (emulated)'")
    durations.add_argument("--db", type=Path, help="default: the history database")
    durations.add_argument("--last-runs", type=int, default=10, metavar="N",
                           help="median over each lane's last N runs (default 10)")
    out = durations.add_mutually_exclusive_group(required=True)
    out.add_argument("--out", type=Path, metavar="FILE", help="one lane's file")
    out.add_argument("--out-dir", type=Path, metavar="DIR", help="DIR/<lane>.json for each lane")
    durations.set_defaults(func=cmd_durations)


def _register_pipeline(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pipeline = sub.add_parser(
        "pipeline", help="print a Buildkite or GitHub Actions pipeline: the shard durations, "
                         "one step per matrix x shard, the nightly report")
    pipeline.add_argument("--provider", required=True, metavar="NAME",
                          help="the CI provider: buildkite or github")
    kind = pipeline  # one of --nightly, --pull-request, --changed-since (checked in _kind)
    kind.add_argument("--nightly", action="store_true",
                      help="only matrices with ci.nightly, then the nightly report job")
    kind.add_argument("--pull-request", action="store_true",
                      help="Buildkite: one step that selects the lanes when the build runs "
                           "(against the merge base with the pull request's target) and "
                           "uploads them; GitHub's workflow always selects at run time")
    kind.add_argument("--changed-since", metavar="REF",
                      help="Buildkite, at run time: only the lanes the change since the merge "
                           "base with REF affects, each step running only the affected tests")
    add_engine_arguments(pipeline)
    pipeline.add_argument("--matrices", metavar="A,B", default="",
                          help="these matrices, in this order (default: all)")
    pipeline.add_argument("--template", metavar="FILE", type=Path,
                          help="default: ci/templates/<provider>.yml in the checkout")
    pipeline.add_argument("--report-queue", metavar="QUEUE",
                          help="agent queue / runner label of the durations, select and "
                               "report steps")
    pipeline.add_argument("--out", metavar="FILE", type=Path, help="write here, not stdout")
    pipeline.add_argument("--db", type=Path,
                          help="history database that sizes the shards of a --changed-since "
                               "pipeline (default: the history database)")
    pipeline.set_defaults(func=cmd_pipeline)


def _kind(args: argparse.Namespace) -> Kind:
    from harness.ci.pipeline import Kind
    from harness.ci.providers import ci_provider

    provider = ci_provider(args.provider)
    chosen = [flag for flag, on in (("--nightly", args.nightly),
                                    ("--pull-request", args.pull_request),
                                    ("--changed-since", _selects(args))) if on]
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(chosen)}: contradictory (a nightly runs every nightly "
                         "lane in full; a pull request pipeline selects at run time, "
                         "--changed-since now); choose one")
    if args.db is not None and not _selects(args):
        raise UsageError("--db sizes the shards of a --changed-since pipeline; "
                         "without --changed-since it has no use")
    if _selects(args) and not provider.UPLOADS_AT_RUN_TIME:
        raise UsageError(f"--provider {args.provider} --changed-since: {provider.WHY_NO_UPLOAD}")
    if args.nightly:
        return Kind.NIGHTLY
    if _selects(args):
        return Kind.CHANGED
    if args.pull_request and provider.UPLOADS_AT_RUN_TIME:
        return Kind.PULL_REQUEST
    return Kind.FULL


def cmd_pipeline(args: argparse.Namespace) -> int:
    from harness.ci.lanes import choose
    from harness.ci.providers import generate
    from harness.history import default_db_path
    from harness.roots import locate, project_root

    kind = _kind(args)
    root = project_root()
    wanted = _names(args.matrices)
    targets, notes = choose(root, db=args.db or default_db_path(), nightly=args.nightly,
                            wanted=wanted, changed_since=args.changed_since,
                            engine=engine_options(args))
    if args.changed_since:
        notes.insert(0, f"--changed-since {args.changed_since}: the lanes of this change")
    for line in notes:
        print(f"harness: {line}", file=sys.stderr)
    template = args.template or locate(f"ci/templates/{args.provider}.yml", root)
    shown = (f"ci/templates/{args.provider}.yml" if args.template is None
             else str(args.template))
    text = generate(targets, args.provider, template, kind=kind,
                    report_queue=args.report_queue, wanted=wanted, shown_template=shown,
                    notes=notes)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        steps = sum(t.shards for t in targets)
        print(f"wrote {args.out}: {kind.value} pipeline, {len(targets)} matrices, "
              f"{steps} test steps")
    return 0


def _selects(args: argparse.Namespace) -> bool:
    """A harness change (--changed-since) or an engine change selects the lanes."""
    return bool(args.changed_since) or engine_options(args) is not None


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def cmd_select(args: argparse.Namespace) -> int:
    from harness.ci.lanes import choose, github_outputs, write_durations
    from harness.history import default_db_path
    from harness.roots import project_root

    if args.nightly and args.changed_since:
        raise UsageError("--nightly and --changed-since: a nightly runs every nightly lane "
                         "in full; choose one")
    db = args.db or default_db_path()
    targets, notes = choose(project_root(), db=db, nightly=args.nightly,
                            wanted=_names(args.matrices), changed_since=args.changed_since,
                            engine=engine_options(args),
                            self_hosted=not args.no_self_hosted)
    for line in notes:
        print(f"harness: {line}", file=sys.stderr)
    if args.durations_dir is not None:
        for line in write_durations([t.matrix for t in targets], db, args.durations_dir):
            print(f"harness: {line}", file=sys.stderr)
    for line in github_outputs(targets):
        print(line)
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
    return Exit.FAILED


def cmd_check_shards(args: argparse.Namespace) -> int:
    from harness.ci.shards import check_paths

    for line in check_paths(args.paths):
        print(f"harness: {line}")
    return 0


def cmd_durations(args: argparse.Namespace) -> int:
    from harness.ci.lanes import write_durations
    from harness.history import default_db_path
    from harness.results.layout import Lane
    from harness.shard.durations import dump, durations_for

    lanes = _names(args.matrix)
    db = args.db or default_db_path()
    if args.out_dir is not None:
        for line in write_durations(lanes, db, args.out_dir, last_runs=args.last_runs):
            print(line)
        return 0
    if len(lanes) != 1:
        raise UsageError(f"--matrix {args.matrix}: --out writes one lane's file; "
                         "use --out-dir for several")
    found = durations_for(Lane.parse(lanes[0]), db, last_runs=args.last_runs)
    dump(found, args.out)
    print(f"wrote {args.out}: {len(found.durations)} tests timed on {lanes[0]}, "
          f"{len(found.siblings)} sibling lanes")
    return 0
