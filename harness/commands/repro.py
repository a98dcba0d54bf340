"""``harness repro``: run a run's failed tests again, the same way."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands.run import add_runner_options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "repro",
        help="re-run what failed in a run, the same way",
        description="Rebuild a run from its run folder (or a JUnit file) - the recorded "
        "matrix, seed, emulation, runner, thread environment and shard - and run its failed "
        "tests again through the same workflow as 'harness run' (a new run folder whose "
        "manifest names the original in repro_of).",
    )
    p.add_argument(
        "target",
        type=Path,
        nargs="?",
        metavar="RUN_FOLDER|JUNIT_XML",
        help="reports/<matrix>/<run-id>/, one of its junit/*.xml, or a loose JUnit file",
    )
    pick = p.add_mutually_exclusive_group()
    pick.add_argument(
        "--failed", action="store_true", help="the failed and errored tests (the default)"
    )
    pick.add_argument(
        "--test",
        action="append",
        default=[],
        metavar="ID",
        help="a node id (path::name[params], its file must exist here) or a "
        "substring of the run's node ids; repeatable",
    )
    p.add_argument(
        "--emulate",
        action="store_true",
        help="run a GPU run's tests on this CPU under the platform's profile",
    )
    p.add_argument("--dry-run", action="store_true", help="print the commands; run nothing")
    p.add_argument(
        "--python",
        default="matrix",
        metavar="matrix|current|PATH",
        help="interpreter: the matrix's venv (default), the current one, or a path",
    )
    p.add_argument("--reports", type=Path, metavar="DIR", help="reports folder (default: reports/)")
    add_runner_options(p, docker_help="run in the platform's container (default: as the run did)",
                       local_help="run locally even if the run used docker")
    p.add_argument(
        "--trust-run-folder",
        action="store_true",
        help="accept what the run folder records beyond this checkout's matrix (container "
        "options, non-pin requirements, a changed matrix.json) and its whole environment",
    )
    add_standalone_options(p)
    p.set_defaults(func=run)


def add_standalone_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("standalone script (docs/repro.md)")
    g.add_argument("--standalone", type=Path, metavar="OUT.py",
                   help="write one case (--test ID) as a script needing only torch, numpy "
                   "and the engine, as its suite's standalone hook writes it (the shipped: "
                   "a kernel_parity case of the vllm provider, the vllm_engine suite's)")
    g.add_argument("--matrix", metavar="M", help="with --standalone: the case of matrix M "
                   "(seed 0) instead of a run folder's")
    g.add_argument("--minimize", action="store_true",
                   help="with --standalone: shrink the case while it fails the same way")
    g.add_argument("--minimize-budget", type=float, default=900.0, metavar="S",
                   help="with --minimize: start no trial after S seconds (default 900)")


def run(args: argparse.Namespace) -> int:
    from harness.errors import UsageError
    from harness.repro.run import (
        build_request,
        check_checkout,
        choose,
        describe,
        load_recorded_matrix,
        read_recorded,
        say,
    )
    from harness.roots import project_root
    from harness.run.request import RunContext
    from harness.run.workflow import run_workflow

    root = project_root()
    if args.standalone is not None:
        from harness.platform.cache import cache_root
        from harness.repro.standalone_main import make_standalone
        from harness.roots import import_path

        return make_standalone(root=root, target=args.target, matrix_name=args.matrix,
                               tests=list(args.test), out=args.standalone,
                               minimize=args.minimize, budget_s=args.minimize_budget,
                               python=args.python, trust=args.trust_run_folder,
                               import_root=lambda m: import_path(cache_root(m)))
    if args.matrix or args.minimize:
        raise UsageError("--matrix and --minimize go with --standalone OUT.py")
    if args.target is None:
        raise UsageError("harness repro needs a run folder or a JUnit file")
    rec = read_recorded(args.target)
    matrix = load_recorded_matrix(rec, root, trust=args.trust_run_folder)
    check_checkout(rec, root)
    choice = choose(rec, matrix, root, list(args.test))
    if not choice.tests and not choice.whole:
        say(f"run {rec.run_id} has no failed tests; nothing to rerun (--test ID picks tests)")
        return 0
    if args.emulate and not rec.emulate:
        say(f"the run used {matrix.name}'s device; emulating it on this CPU")
    describe(rec, choice)
    request = build_request(
        rec,
        choice,
        matrix=matrix,
        emulate=args.emulate or rec.emulate,
        docker=args.docker,
        trust=args.trust_run_folder,
        reports=args.reports,
        dry_run=args.dry_run,
        python=args.python,
        keep_container=args.keep_container,
        command_line=tuple(["harness", *sys.argv[1:]]),
    )
    if args.dry_run:  # everything the run would set, not only the pytest command
        say(f"matrix: {request.platform_file or matrix.file} (hash {matrix.hash[:12]})")
        say(f"seed {request.seed}; shard {request.shard or '-'}; workers "
            f"{request.workers or 'as planned'}; emulate {request.emulate}")
        for key, value in sorted(request.env.items()):
            say(f"would set {key}={value}")
    return run_workflow(RunContext(request=request, root=root, matrix=matrix))
