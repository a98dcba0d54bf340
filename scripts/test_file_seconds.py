#!/usr/bin/env python3
"""Each test file's seconds in a full run of the harness's own tests, from that run's JUnit
(``python -m pytest tests -n 2 -p no:cacheprovider --junitxml=FILE``), written as
tests/file_seconds.json: tests/conftest.py hands the files to the xdist workers longest
first. Run it again after a change that makes a test file much longer or shorter.

    python scripts/test_file_seconds.py FILE [--out tests/file_seconds.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def file_seconds(junit: Path) -> dict[str, float]:
    """{tests/.../test_x.py: seconds} from pytest's JUnit (a case's classname is its module
    dotted, ``tests.integration.test_x`` or ``tests.unit.test_y.TestClass``)."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        while parts and not (ROOT / Path(*parts)).with_suffix(".py").is_file():
            parts.pop()  # a class inside the module
        if parts:
            seconds[str(Path(*parts).with_suffix(".py").as_posix())] += float(
                case.get("time") or 0.0)
    return {name: round(value, 1) for name, value in
            sorted(seconds.items(), key=lambda item: (-item[1], item[0]))}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "file_seconds.json")
    args = parser.parse_args(argv)
    found = file_seconds(args.junit)
    if not found:
        print(f"{args.junit}: no test case of tests/ in it", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(found, indent=0) + "\n")
    print(f"wrote {args.out}: {len(found)} files, {sum(found.values()):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
