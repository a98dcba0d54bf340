"""`harness matrix list | show | validate | schema | lanes`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.errors import ConfigError, ConfigErrors, Exit, UsageError

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "matrix" / "matrix.schema.json"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("matrix", help="list, show and validate capability matrices")
    sub = parser.add_subparsers(dest="matrix_command", metavar="ACTION", required=True)

    listing = sub.add_parser("list", help="the platform matrices (abstract ones hidden)")
    listing.set_defaults(func=cmd_list)

    show = sub.add_parser("show", help="print a matrix file, or its resolved merge")
    show.add_argument("name", help="matrix name (rocm) or path to a YAML file")
    show.add_argument("--resolved", action="store_true", help="print the merged result")
    show.set_defaults(func=cmd_show)

    validate = sub.add_parser("validate", help="check matrix files; exit 2 on any problem")
    validate.add_argument("files", nargs="*", help="default: every matrices/*.yaml")
    validate.set_defaults(func=cmd_validate)

    lanes = sub.add_parser(
        "lanes", help="what each lane's suites read per lane (golden ids, expectations): "
        "exit 1 where one is missing and no known failure says why")
    lanes.add_argument("names", nargs="*", help="default: every listed matrix")
    lanes.set_defaults(func=cmd_lanes)

    schema = sub.add_parser("schema", help="print the JSON Schema generated from schema.py")
    schema.add_argument(
        "--check", action="store_true", help="exit 2 if the checked-in schema file is out of date"
    )
    schema.set_defaults(func=cmd_schema)


def cmd_list(args: argparse.Namespace) -> int:
    from harness.matrix import list_matrices, load_matrix

    rows = []
    for name in list_matrices():
        matrix = load_matrix(name)
        rows.append((matrix.name, matrix.family, matrix.hardware, matrix.description))
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3])
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    import yaml

    from harness.matrix import load_matrix

    matrix = load_matrix(args.name)
    print(f"# {matrix.file}  hash {matrix.hash}")
    if args.resolved:
        sys.stdout.write(
            yaml.safe_dump(
                dict(matrix.resolved), sort_keys=False, default_flow_style=None, width=100
            )
        )
    else:
        from harness.roots import locate, project_root

        path = locate(matrix.file, project_root())
        sys.stdout.write(path.read_text(encoding="utf-8"))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from harness.matrix import load_matrix
    from harness.roots import matrix_dirs, project_root

    files = list(args.files)
    if not files:
        # Every file of the project's matrices/ (abstract ones too), then the shipped ones.
        files = [str(p) for d in matrix_dirs(project_root()) for p in sorted(d.glob("*.yaml"))]
    problems: list[ConfigError] = []
    for name in files:
        try:
            matrix = load_matrix(name)
        except ConfigErrors as errors:
            problems.extend(errors.errors)
            continue
        except ConfigError as error:
            problems.append(error)
            continue
        print(f"ok {matrix.file}")
    if problems:
        # Deduplicate: a broken parent is reported once, not once per child.
        unique = list(dict.fromkeys(str(p) for p in problems))
        raise ConfigErrors([ConfigError(line) for line in unique])
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from harness.matrix.json_schema import json_schema

    text = json.dumps(json_schema(), indent=2) + "\n"
    if not args.check:
        sys.stdout.write(text)
        return 0
    try:
        current = SCHEMA_FILE.read_text(encoding="utf-8")
    except OSError:
        current = ""
    if current != text:
        raise UsageError(
            f"{SCHEMA_FILE.name} is out of date: run "
            "`harness matrix schema > harness/matrix/matrix.schema.json`"
        )
    print(f"ok {SCHEMA_FILE.name}")
    return 0


def cmd_lanes(args: argparse.Namespace) -> int:
    """Each matrix's lanes (on its own hardware, and emulated where it has an emulation):
    one line per per-lane file its suites read that is absent."""
    from harness.matrix import list_matrices, load_matrix
    from harness.matrix.lane_data import needs
    from harness.roots import project_root

    root = project_root()
    bad = 0
    for name in args.names or list_matrices():
        matrix = load_matrix(name)
        modes = [False] + ([True] if matrix.resolved.get("emulation") else [])
        for emulate in modes:
            found = needs(matrix, emulate=emulate, root=root)
            bad += sum(1 for need in found if not need.covered_by)
            lane = f"{matrix.name}{' (emulated)' if emulate else ''}"
            print(f"ok {lane}" if not found else "\n".join(n.line(matrix.name, emulate)
                                                            for n in found))
    return Exit.FAILED if bad else Exit.OK
