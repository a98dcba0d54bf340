"""``harness select [--changed-since REF] [--engine-source TREE --engine-change CHANGE]
[--explain] [--collect] [--json]``.

Prints, per lane, whether a change leaves it alone, runs part of it or all of it, and
the changed file behind each part; with ``--collect`` (and ``--explain``), each selected
test of each lane with the file that selected it. An engine source change selects through
the op record in the history (``--db``): the ops each changed file reaches, and the tests
that called them, per lane.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import UsageError

if TYPE_CHECKING:
    from harness.select.engine_change import EngineChange
    from harness.select.rules import Rule, Selection


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "select", help="the lanes and tests a change can affect",
        description="From `git diff REF` (plus untracked files): per lane, the tests a "
                    "change can affect, derived from the registry, the matrices and the "
                    "suites' import graph.")
    parser.add_argument("--changed-since", metavar="REF",
                        help="git revision to diff the working tree against")
    add_engine_arguments(parser)
    parser.add_argument("--db", type=Path, metavar="HISTORY",
                        help="history database whose op record maps an engine change to "
                             "tests (default: $HARNESS_HISTORY or reports/history.sqlite)")
    parser.add_argument("--matrices", metavar="A,B", default="",
                        help="only these lanes (default: every matrix)")
    parser.add_argument("--explain", action="store_true",
                        help="the changed file behind every selected lane, rule and test")
    parser.add_argument("--collect", action="store_true",
                        help="list the selected tests (collects each lane with pytest)")
    parser.add_argument("--python", default=sys.executable, metavar="PATH",
                        help="interpreter to collect in (default: this one)")
    parser.add_argument("--json", action="store_true", help="print the selection as JSON")
    parser.set_defaults(func=cmd_select)


def cmd_select(args: argparse.Namespace) -> int:
    from harness.roots import project_root
    from harness.select import select_changes

    root = project_root()
    wanted = [m.strip() for m in args.matrices.split(",") if m.strip()]
    change = engine_change_of(args)
    if change is None and not args.changed_since:
        raise UsageError("harness select: give --changed-since REF, or --engine-source TREE "
                         "--engine-change CHANGE (or both)")
    selection = select_changes(root, args.changed_since, matrices=wanted,
                               engine_change=change, db=args.db)
    if args.json:
        print(json.dumps(selection.to_json(), indent=1))
        return 0
    for line in render(selection, explain=args.explain):
        print(line)
    if args.collect:
        for line in render_tests(selection, root, args.python, explain=args.explain):
            print(line)
    return 0


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine-source", metavar="TREE",
                        help="the engine's source the lanes ran (a folder or an sdist)")
    parser.add_argument("--engine-change", metavar="CHANGE",
                        help="its change: a .diff/.patch, the changed folder or sdist, or a "
                             "revision of TREE's git checkout")


def engine_options(args: argparse.Namespace) -> tuple[str, str] | None:
    """(source, change) the two options name: both, or neither (None)."""
    source, change = getattr(args, "engine_source", None), getattr(args, "engine_change", None)
    if bool(source) != bool(change):
        given, missing = (("--engine-source", "--engine-change") if source
                          else ("--engine-change", "--engine-source"))
        raise UsageError(f"{given} needs {missing} (the engine's source, and its change)")
    return (str(source), str(change)) if source else None


def engine_change_of(args: argparse.Namespace) -> EngineChange | None:
    """The engine change the two options name (both or neither)."""
    named = engine_options(args)
    if named is None:
        return None
    from harness.select.engine_change import read_change

    return read_change(*named)


def _rule_text(rule: Rule) -> str:
    if rule.kind == "module":
        return f"tests in {rule.path}"
    if rule.kind == "tests":
        return f"{len(rule.ids)} tests that called {', '.join(rule.ops)}"
    ops = ", ".join(rule.ops) if rule.ops else "every op"
    return f"tests running provider {rule.provider} ({ops})"


def render(selection: Selection, *, explain: bool) -> list[str]:
    lines = []
    if selection.ref:
        lines.append(f"harness select: {len(selection.changed)} changed file(s) since "
                     f"{selection.ref[:12]}")
        lines += [f"  {path}" for path in selection.changed]
    if selection.engine:
        reached = dict(selection.engine_ops)
        lines.append(f"engine change to {selection.engine}: "
                     f"{len(selection.engine_changed)} file(s)")
        for path in selection.engine_changed:
            ops = reached.get(path)
            shown = f" -> {', '.join(ops)}" if explain and ops else ""
            lines.append(f"  {path}{shown}")
    for path, why in selection.everything:
        lines.append(f"everything runs: {path}: {why}")
    for path, why in selection.notes:
        lines.append(f"selects nothing: {path}: {why}")
    for name, lane in selection.lanes.items():
        if lane.full:
            how = " in its container" if lane.docker else ""
            lines.append(f"lane {name}: all{how}")
            if explain:
                lines += [f"    <- {path}: {why}" for path, why in lane.reasons]
        elif lane.rules:
            lines.append(f"lane {name}: part")
            lines += _grouped(lane.rules, explain)
        else:
            lines.append(f"lane {name}: nothing")
    if selection.self_tests:
        lines.append("harness's own tests:")
        lines += _grouped(selection.self_tests, explain)
    return lines


def _grouped(rules: Iterable[Rule], explain: bool) -> list[str]:
    seen: dict[str, list[Rule]] = {}
    for rule in rules:
        seen.setdefault(_rule_text(rule), []).append(rule)
    lines = []
    for text, same in seen.items():
        lines.append(f"    {text}")
        if explain:
            lines += [f"      <- {r.source}: {r.why}" for r in same]
            ids = sorted({i for r in same for i in r.ids})
            lines += [f"        {i}" for i in ids]
    return lines


def render_tests(selection: Selection, root: Path, python: str, *, explain: bool) -> list[str]:
    from harness.matrix import load_matrix
    from harness.runners.suite_env import collection_env
    from harness.select.collect import collect

    lines: list[str] = []
    for name, lane in selection.lanes.items():
        if not lane.affected:
            continue
        matrix = load_matrix(name, root)
        env = collection_env(matrix, root)
        ids = collect(python, root, name, [s for s in matrix.suites.values() if s.enabled],
                      env=env)
        chosen = [t for t in ids if lane.selects(t)]
        lines.append(f"lane {name}: {len(chosen)} of {len(ids)} tests")
        for test in chosen:
            if explain:
                why = "; ".join(dict.fromkeys(f"{r.source}" for r in lane.why(test)))
                lines.append(f"  {test}  <- {why}")
            else:
                lines.append(f"  {test}")
    return lines
