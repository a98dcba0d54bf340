"""``harness import buildkite FILE [--step LABEL|KEY ...] [--only PATH ...] [--per-file]
[--extends M] [--name N] [--out P] [--source DIR]``; ``--audit [--json PATH]``: the gaps
in the engine's own CI instead (importers/audit.py), nothing written but the JSON.

Writes a user matrix with one suite per pytest command of the chosen steps, and prints
one line for each thing the matrix has no place for; nothing is dropped silently. Bad
input (not YAML, no such step, a step with no pytest) is one line and exit 2, with
nothing written.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "import", help="another CI's test definition as a matrix",
        description="Read another CI system's test steps and write a matrix of your own "
                    "that runs them as suites.")
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    bk = kinds.add_parser("buildkite", help="a Buildkite step file (vLLM's format)")
    bk.add_argument("file", type=Path,
                    help="the step file, e.g. .buildkite/hardware_tests/cpu.yaml")
    bk.add_argument("--step", action="append", default=[], metavar="LABEL|KEY",
                    help="only this step (repeatable; default: every step)")
    bk.add_argument("--only", action="append", default=[], metavar="PATH",
                    help="only the steps' targets at or under this path (repeatable)")
    bk.add_argument("--per-file", action="store_true",
                    help="one suite per test file (a file that dies at collection takes only "
                         "its own suite; the report shows the step file by file)")
    bk.add_argument("--extends", default="vllm-cpu", metavar="MATRIX",
                    help="the shipped matrix the new one extends (default: vllm-cpu)")
    bk.add_argument("--name", default="imported", help="the new matrix's name")
    bk.add_argument("--out", type=Path, metavar="PATH",
                    help="where to write it (default: matrices/NAME.yaml here)")
    bk.add_argument("--source", type=Path, metavar="DIR",
                    help="the tree the steps run in (default: the folder above .buildkite)")
    bk.add_argument("--audit", action="store_true",
                    help="write nothing: the gaps in the engine's own CI, read from every step "
                         "file under the source's .buildkite/ and its tests/ (docs/vllm.md)")
    bk.add_argument("--json", type=Path, metavar="PATH",
                    help="with --audit: also write the audit as JSON here")
    bk.set_defaults(func=cmd_import_buildkite)


def cmd_audit(args: argparse.Namespace) -> int:
    """The audit: text on stdout, JSON where asked; nothing else written."""
    import json

    from harness.importers.audit import audit, render
    from harness.importers.buildkite import read_steps
    from harness.importers.matrix_out import source_root

    read_steps(args.file)  # the step file given must read as one (one line if not)
    result = audit((args.source or source_root(args.file)).resolve())
    print(render(result), end="")
    if args.json is not None:
        args.json.write_text(json.dumps(result.to_json(), indent=1) + "\n", encoding="utf-8")
    return 0


def cmd_import_buildkite(args: argparse.Namespace) -> int:
    from harness.errors import UsageError

    if args.audit:
        return cmd_audit(args)
    from harness.importers.buildkite import import_steps
    from harness.importers.matrix_out import render, source_root
    from harness.importers.release import source_release
    from harness.matrix import load_matrix

    imported = import_steps(args.file, args.step, args.only, split=args.per_file)
    if not imported.suites:
        raise UsageError(f"{args.file}: no step with a pytest command to import")
    source = (args.source or source_root(args.file)).resolve()
    release = source_release(source)
    text = render(imported, extends=args.extends, name=args.name, source=source,
                  release=release)
    out = (args.out or Path("matrices") / f"{args.name}.yaml").resolve()
    named = "" if out.stem == args.name else f"name: {args.name}\n"
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir) / out.name
        scratch.write_text(named + text, encoding="utf-8")
        load_matrix(str(scratch))  # what it wrote must load as a matrix, or nothing is kept
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(scratch, out)
    for line in imported.unmapped:
        print(f"harness: unmapped: {line}", file=sys.stderr)
    if release is None:
        print(f"harness: warning: {source}: the release its tests come from is not known (no "
              "PKG-INFO, no git commit): the runs cannot hold them against the lane's engine",
              file=sys.stderr)
    names = ", ".join(s.name for s in imported.suites)
    tests = f", tests from {release}" if release else ""
    print(f"harness: wrote {out}: matrix {args.name} (extends {args.extends}{tests}), suites "
          f"{names}")
    return 0
