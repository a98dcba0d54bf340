"""``harness run``: resolve the matrix, plan, run the suites, write the run folder."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import UsageError
from harness.results import layout

if TYPE_CHECKING:
    from harness.matrix.model import Matrix
    from harness.results.manifest import PinOverride



def add_runner_options(p: argparse.ArgumentParser, *, docker_help: str, local_help: str) -> None:
    """--docker / --local (one of them; neither: the default decides) and --keep-container,
    for ``harness run`` and ``harness repro``."""
    docker = p.add_mutually_exclusive_group()
    docker.add_argument("--docker", dest="docker", action="store_true", default=None,
                        help=docker_help)
    docker.add_argument("--local", dest="docker", action="store_false", help=local_help)
    p.add_argument("--keep-container", action="store_true", help="keep the container for debugging")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run the suites of a matrix and write a run folder",
        description="Run the suites of a platform matrix and write "
        "reports/<matrix>/<run-id>/ (JUnit, merged.xml, manifest.json, logs). "
        "Arguments after -- go to pytest, after the harness's and the suite's own.",
    )
    p.add_argument("--matrix", default="cpu", help="matrix name or YAML path (default: cpu)")
    p.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this suite (repeatable; default: the matrix's suites)",
    )
    p.add_argument("-k", dest="keyword", metavar="EXPR", help="pytest -k expression")
    p.add_argument("--test", action="append", default=[], metavar="ID",
                   help="run only this test: a node id (path::name[params], relative to its "
                   "suite's rootdir), in the matrix suite whose path holds it; repeatable")
    p.add_argument(
        "--emulate",
        action="store_true",
        help="run a GPU profile on the CPU (hardware-only checks skip)",
    )
    p.add_argument(
        "--workers", type=int, metavar="N", help="pytest-xdist workers (default: the CPU budget)"
    )
    p.add_argument("--reports", type=Path, metavar="DIR", help="reports folder (default: reports/)")
    p.add_argument("--dry-run", action="store_true", help="print the plan; run nothing")
    p.add_argument(
        "--python",
        default="matrix",
        metavar="matrix|current|PATH",
        help="interpreter: the matrix's venv (default), the current one, or a path",
    )
    add_runner_options(p, docker_help="run in the platform's container",
                       local_help="run locally even if the matrix defaults to docker")
    p.add_argument("--shard", metavar="I/N", help="run only shard I of N (1-based)")
    p.add_argument(
        "--durations",
        type=Path,
        metavar="FILE",
        help="balance --shard by this durations file (`harness ci durations`), the one every "
        "shard of a build reads; default: this host's history",
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="write the HTML/Markdown/JSON report of this run into <run folder>/report/ and "
        "print its path",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for every test (default 0)")
    _add_job_options(p)
    # `harness run ... -- ARGS`: harness.cli splits ARGS off before parsing.
    p.set_defaults(func=run, pytest_args=[])


def _add_job_options(p: argparse.ArgumentParser) -> None:
    """What a CI job narrows or relaxes: the change it tests, empty suites, foreign hosts,
    the engine release it tries."""
    p.add_argument(
        "--pin",
        action="append",
        default=[],
        metavar="NAME==VERSION",
        help="override the matrix's pin of NAME for this run (repeatable); the environment "
        "is built once per pins and the manifest records the override",
    )
    p.add_argument(
        "--changed-since",
        metavar="REF",
        help="run only what `git diff REF` can affect on this lane (see `harness select`)",
    )
    from harness.commands.select import add_engine_arguments

    add_engine_arguments(p)
    p.add_argument(
        "--update-expectations",
        action="store_true",
        help="rewrite the platform's fusion / e2e expectation files",
    )
    p.add_argument(
        "--across-releases",
        action="store_true",
        help="run a suite whose tests are from another release than the lane's engine "
             "(tests_from, written by harness import); a module of it that fails to import "
             "is labelled a release mismatch (default: refused, exit 3, nothing run)",
    )
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="a suite in which no test ran (nothing selected) passes instead of exit 1",
    )
    p.add_argument(
        "--skip-unavailable",
        action="store_true",
        help="on a host that is not the matrix's (no device, or its probe refuses this CPU), "
        "write a run folder marked skipped with the probe's line and exit 0 instead of 3",
    )


def _check_shard(text: str | None) -> layout.Shard | None:
    if text is None:
        return None
    try:
        return layout.Shard.parse(text)
    except ValueError:
        raise UsageError(f"--shard {text}: expected I/N with 1 <= I <= N, e.g. 2/4") from None


def _check_durations(path: Path | None) -> Path | None:
    if path is not None and not path.is_file():
        raise UsageError(f"--durations {path}: no such file")
    return path


def run(args: argparse.Namespace) -> int:
    from harness.matrix import load_matrix
    from harness.roots import project_root
    from harness.run.request import RunContext, RunRequest
    from harness.run.workflow import run_workflow

    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}: expected 1 or more")
    request = RunRequest(
        matrix=args.matrix,
        suites=tuple(args.suite),
        keyword=args.keyword,
        emulate=args.emulate,
        workers=args.workers,
        reports=args.reports,
        dry_run=args.dry_run,
        python=args.python,
        docker=args.docker,
        keep_container=args.keep_container,
        shard=_check_shard(args.shard),
        durations_file=_check_durations(args.durations),
        seed=args.seed,
        update_expectations=args.update_expectations,
        allow_empty=args.allow_empty,
        skip_unavailable=args.skip_unavailable,
        across_releases=args.across_releases,
        command_line=tuple(["harness", *sys.argv[1:]]),
        pytest_args=tuple(args.pytest_args),
    )
    root = project_root()
    matrix, pins = _pinned(load_matrix(args.matrix, root=root), args)
    request = replace(request, pins=pins)
    if args.test:
        tests = _tests(matrix, root, args.test)
        request = replace(request, tests=tests, suites=tuple(tests))
    from harness.commands.select import engine_change_of

    change = engine_change_of(args)
    if args.changed_since or change is not None:
        from harness.run.narrow import narrow_request

        narrowed = narrow_request(request, root, matrix, args.changed_since, change)
        if narrowed is None:
            return 0
        request = replace(narrowed, command_line=request.command_line)
    # The report also after failed tests or an infrastructure error: that run is the one
    # to read.
    return run_workflow(RunContext(request=request, root=root, matrix=matrix),
                        report=_report if args.report else None)


def _pinned(matrix: Matrix, args: argparse.Namespace) -> tuple[Matrix, tuple[PinOverride, ...]]:
    """The matrix with the --pin overrides in place (run/pins.py), and the overrides."""
    if not args.pin:
        return matrix, ()
    if args.python != "matrix":
        raise UsageError(f"--pin {args.pin[0]}: pins apply to the matrix's environment; "
                         f"--python {args.python} installs nothing (drop one of them)")
    from harness.run.pins import apply_pins

    return apply_pins(matrix, args.pin, emulate=args.emulate)


def _tests(matrix: Matrix, root: Path, wanted: list[str]) -> dict[str, tuple[str, ...]]:
    """--test node ids by the suite that holds each (a UsageError for one that is in no
    suite of the matrix, or not in this checkout)."""
    from harness.matrix.suite_paths import suite_places
    from harness.repro.pick import pick_tests

    for value in wanted:
        if "::" not in value:
            raise UsageError(f"--test {value}: expected a node id (path::name[params])")
    suites = {name: s for name, s in matrix.suites.items() if not s.not_applicable}
    return pick_tests(wanted, [], suite_places(suites, root), root)


def _report(run_dir: Path) -> None:
    """Print the report's path; a report that cannot be written is a warning, never the
    run's exit status."""
    from harness.errors import HarnessError
    from harness.reports.one_run import write_run_report

    def warn(line: str) -> None:
        print(f"harness: warning: {line}", file=sys.stderr)

    if not (run_dir / layout.MANIFEST).is_file():
        warn(f"{run_dir}: no {layout.MANIFEST}; no report")
        return
    try:
        html = write_run_report(run_dir, warn)
    except HarnessError as error:
        warn(f"report not written: {error}")
        return
    print(f"report: {html}")
