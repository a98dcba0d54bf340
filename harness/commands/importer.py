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
    bk.add_argument("--across-releases", action="store_true",
                    help="with --audit: a source of another release than the --extends "
                         "lane's engine, audited all the same")
    bk.set_defaults(func=cmd_import_buildkite)


def cmd_audit(args: argparse.Namespace) -> int:
    """The audit: text on stdout, JSON where asked; nothing else written."""
    import json

    from harness.importers.audit import audit
    from harness.importers.audit_render import render
    from harness.importers.buildkite import read_steps
    from harness.importers.matrix_out import source_root

    read_steps(args.file)  # the step file given must read as one (one line if not)
    source = (args.source or source_root(args.file)).resolve()
    said = _lane_release(args, source)  # before the audit: a refusal is at once
    try:
        focus = args.file.resolve().relative_to(source).as_posix()
    except ValueError:
        focus = None  # a step file outside the source given with --source: not read alone
    result = audit(source, focus)
    print(render(result) + said, end="")
    if args.json is not None:
        args.json.write_text(json.dumps(result.to_json(), indent=1) + "\n", encoding="utf-8")
    return 0


def _lane_release(args: argparse.Namespace, source: Path) -> str:
    """The audit names lanes for vLLM's libraries: the --extends lane's engine must be a
    vLLM that loads them, of the source's release (or --across-releases); a line saying
    which, or one line of refusal (exit 2)."""
    from harness.errors import UsageError
    from harness.importers.release import source_release
    from harness.matrix import load_matrix
    from harness.run.releases import pinned_versions

    engine = pinned_versions(load_matrix(args.extends), "vllm")
    if not engine:
        raise UsageError(f"--extends {args.extends}: the lane's engine is no vLLM (it pins "
                         "none), so no lane loads the libraries the audit holds the pipeline "
                         "against: name a vLLM lane (--extends vllm-cpu)")
    lane = ", ".join(f"{dist} {version}" for dist, version in sorted(engine.items()))
    release = source_release(source)
    if release is None:
        return f"\nsource release unknown (no PKG-INFO, no git commit); lanes: {lane}\n"
    name, _, version = release.partition("==")
    same = bool(version) and all(v.split("+")[0] == version for v in engine.values())
    if not same and not args.across_releases:
        raise UsageError(f"{source}: {name} {version or release}'s source, and lane "
                         f"{args.extends}'s engine is {lane}: the lanes the audit names stand "
                         "for that release (audit the source of the lane's release, or say you "
                         "mean it: --across-releases)")
    return f"\nsource {release}; lanes for {lane}" + ("" if same else " (another release)") + "\n"


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
