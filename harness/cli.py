"""The ``harness`` command line: parse, call one workflow, map errors to exit codes."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from harness import __version__
from harness.errors import Exit, HarnessError
from harness.results.writefail import describe, is_write_failure

# Each name is a module under harness/commands/ with ``register(subparsers)``.
COMMANDS: tuple[str, ...] = (
    "run",
    "matrix",
    "cache",
    "history",
    "report",
    "ci",
    "image",
    "repro",
    "bisect",
    "kernels",
    "select",
    "doctor",
    "importer",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Hardware-portability test and CI harness for LLM inference engines.",
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument(
        "--root",
        metavar="DIR",
        help="the project root (its matrices/, suites, reports/); default: $HARNESS_ROOT, "
        "else the nearest folder with a harness.toml or a [tool.harness] pyproject.toml",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"harness.commands.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    tail: list[str] | None = None
    if "--" in words:  # `harness run ... -- ARGS`: ARGS go to pytest untouched
        cut = words.index("--")
        words, tail = words[:cut], words[cut + 1 :]
    args = parser.parse_args(words)
    if tail is not None:
        if not hasattr(args, "pytest_args"):
            parser.error("arguments after -- are for pytest and only 'harness run' takes them")
        args.pytest_args = tail
    if not getattr(args, "func", None):
        parser.print_help()
        return Exit.USAGE
    before = os.environ.get("HARNESS_ROOT")
    if args.root:
        root = Path(args.root).expanduser().resolve()
        if not root.is_dir():
            print(f"harness: error: --root {args.root}: no such folder", file=sys.stderr)
            return Exit.USAGE
        os.environ["HARNESS_ROOT"] = str(root)  # children (suites, kernels) see it too
    try:
        return _call(args)
    finally:  # main() called in-process (a test, a script) leaves the environment as it was
        if before is None:
            os.environ.pop("HARNESS_ROOT", None)
        else:
            os.environ["HARNESS_ROOT"] = before


def _call(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args))
    except HarnessError as error:
        if args.debug:
            traceback.print_exc()
        for line in str(error).splitlines() or [type(error).__name__]:
            _say(f"harness: error: {line}")
        return error.exit_code
    except BrokenPipeError:  # `harness ... | head`: the reader is gone, as with SIGPIPE
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt as stop:  # also harness.process.cancel.Cancelled (SIGTERM, SIGHUP)
        code = int(getattr(stop, "exit_code", Exit.INTERRUPTED))
        _say("harness: interrupted" if code == Exit.INTERRUPTED else f"harness: cancelled ({stop})")
        return code
    except Exception as error:
        if args.debug or not is_write_failure(error):
            raise
        _say(f"harness: error: {describe(error)}")
        return Exit.INFRA


def _say(line: str) -> None:
    """Print to stderr; a terminal that went away (SIGHUP) is not an error of its own."""
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
