"""``harness doctor [--matrix X] [--emulate] [--docker|--local]``: what this host lacks."""

from __future__ import annotations

import argparse

from harness.errors import Exit


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check this host for what a run needs (exit 3 if something is missing)",
        description="Check Python, venv, the C++ compiler and Python headers (inductor), "
        "the Docker engine, qemu/binfmt for s390x images, Chromium for the report tests and "
        "the matrix's device. One line each; a missing thing names the command that "
        "installs it. harness run makes the same checks before building anything.",
    )
    p.add_argument("--matrix", help="check for a run of this matrix (default: a first run)")
    p.add_argument("--emulate", action="store_true", help="as for a run with --emulate")
    docker = p.add_mutually_exclusive_group()
    docker.add_argument("--docker", dest="docker", action="store_true", default=None)
    docker.add_argument("--local", dest="docker", action="store_false")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness.platform.doctor import (
        check_binfmt_s390x,
        check_chromium,
        check_docker,
        run_checks,
    )

    matrix = None
    suites: list[str] = []
    docker = bool(args.docker)
    if args.matrix:
        from harness.matrix import load_matrix
        from harness.run.plan import select_suites

        matrix = load_matrix(args.matrix)
        suites = [s.name for s in select_suites(matrix, [])]
        if args.docker is None:
            docker = bool(matrix.runtime.docker) and not args.emulate
    checks = run_checks(matrix, emulate=args.emulate, docker=docker, suites=suites)
    if matrix is None:
        # A first run needs none of these; the docker tests and s390x images do.
        extras = [check_docker(), check_binfmt_s390x(), check_chromium()]
        checks += [type(c)(what=c.what, ok=c.ok, detail=c.detail, fix=c.fix, required=False)
                   for c in extras]
    for check in checks:
        print(check.line())
    missing = [c for c in checks if c.required and not c.ok]
    if missing:
        print(f"harness doctor: {len(missing)} missing; a run would stop (exit 3) before "
              "building anything")
        return Exit.INFRA
    print("harness doctor: ready")
    return Exit.OK
