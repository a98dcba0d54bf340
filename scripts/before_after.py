"""Behaviour unchanged by a refactor: the same runs made by two commits, their outputs diffed.

    python scripts/before_after.py --before REV [--after REV] --work DIR [--scenario NAME ...]

Each side is a detached ``git worktree`` of its commit under DIR (the harness it runs is
that checkout's: ``python -m harness`` with the checkout first on PYTHONPATH, the suites
importing harness from it as a run does). Each scenario runs on both sides into a folder of
its own (``--reports``, ``HARNESS_HISTORY``), then ``harness report nightly`` over that
history; the run's ``manifest.json``, ``matrix.json`` and ``merged.xml`` and the report's
``report.json`` are flattened to ``path = value`` lines, what differs between two runs of the
same commit masked (below, each with why), and diffed. It prints, per scenario and file, ``same`` or
the lines that differ, and exits 0 (a difference is for the reader to explain: a refactor
that changes behaviour on purpose says so in its note).

Scenarios: ``cpu`` (the cpu matrix, README command 1), ``vllm-cpu`` (vLLM's CPU build; its
environment is built once per pins), ``rocm-emulated`` (``--matrix rocm --emulate``),
``crashed`` and ``timed-out`` (a project of their own, written here: a suite whose third
test aborts its process, a suite whose test sleeps past a 20 s limit).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

SIDES = ("before", "after")
# The checkout's own matrices, or the fault project's (written by _fault_project).
SCENARIOS: dict[str, tuple[str, list[str]]] = {
    "cpu": ("checkout", ["run"]),
    "vllm-cpu": ("checkout", ["run", "--matrix", "vllm-cpu"]),
    "rocm-emulated": ("checkout", ["run", "--matrix", "rocm", "--emulate"]),
    "crashed": ("faults", ["run", "--matrix", "faults", "--suite", "crash"]),
    "timed-out": ("faults", ["run", "--matrix", "faults", "--suite", "hang"]),
}

_FAULT_MATRIX = """\
extends: cpu.yaml
name: faults
description: A crashed suite and a timed-out suite (scripts/before_after.py).
suites:
  crash: {path: checks/test_crash.py, workers: 1, timeout_s: 300, enabled: true}
  hang: {path: checks/test_hang.py, workers: 1, timeout_s: 20, enabled: true}
"""
_CRASH = """\
import os


def test_one():
    assert 1 + 1 == 2


def test_two():
    assert "a" * 2 == "aa"


def test_aborts():
    os.abort()


def test_never_runs():
    assert True
"""
_HANG = """\
import time


def test_one():
    assert 1 + 1 == 2


def test_sleeps_past_the_limit():
    time.sleep(600)
"""

# Keys whose values differ between two runs of one commit: times and durations, ids, the
# host's moment (free memory, load), process ids, versions of the checkout.
_VOLATILE_KEY = re.compile(
    r"(^|_)(time|timestamp|started|finished|ended|start|end|duration|elapsed|seconds|"
    r"wall|run_id|id|pid|created|generated|date|when|at|s|commit|git|sha|hostname|"
    r"available_mb|available|mem_available_mb|load|rss|peak_rss_mb|growth_mb|"
    r"budget_mb|memory_mb|peak_test|line|"
    # the resolved matrix's hash: before 68a56e1 a project's held the folder harness was
    # installed in (its shipped suites' paths); matrix.json is diffed instead, paths masked
    r"hash)$", re.I)
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # a run id (20261205T151852Z-435b7f) and ISO times
    (re.compile(r"\d{8}T\d{6}Z(?:-[0-9a-f]{4,})?"), "<RUN>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?"), "<TIME>"),
    # seconds and sizes in words ("in 3.21s", "12.5 s", "1 min 3 s", "812 MB")
    (re.compile(r"\d+(?:\.\d+)?\s?(?:s|ms|min|seconds?|MB|GB)\b"), "<N unit>"),
    (re.compile(r"\bpid \d+|\bpid=\d+"), "pid <N>"),
    (re.compile(r"0x[0-9a-f]{6,}"), "<ADDR>"),
    # a line of a source file or a matrix, which moves when the file is edited around it
    (re.compile(r"\.(py|yaml):\d+"), r".\1:<L>"),
    (re.compile(r"\bline \d+"), "line <L>"),
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, metavar="REV")
    p.add_argument("--after", default="HEAD", metavar="REV")
    p.add_argument("--work", required=True, type=Path, metavar="DIR")
    p.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    p.add_argument("--diff-only", action="store_true", help="diff what DIR holds; run nothing")
    p.add_argument("--keep", action="store_true", help="keep the two worktrees after the runs")
    p.add_argument("--full", action="store_true",
                   help="every differing line (default: a list's items as one line, counted)")
    args = p.parse_args(argv)
    repo = Path(__file__).resolve().parent.parent
    work = args.work.resolve()
    scenarios = args.scenario or list(SCENARIOS)
    matrices = work / SIDES[0] / "checkout" / "matrices"
    if not args.diff_only:
        for side, rev in zip(SIDES, (args.before, args.after), strict=True):
            checkout = _worktree(repo, work / side / "checkout", rev)
            _fault_project(work / side / "faults")
            for name in scenarios:
                _run(name, checkout, work / side, matrices=matrices)
        if not args.keep:
            for side in SIDES:
                subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force",
                                str(work / side / "checkout")], check=True)
    for name in scenarios:
        print(f"== {name}")
        outs = [work / side / "out" / name for side in SIDES]
        named = [_report_lanes(out) for out in outs]
        both = named[0] & named[1]
        drops = [lanes - both for lanes in named]
        for label in ("manifest.json", "matrix.json", "merged.xml", "report.json"):
            before, after = (_flat(out, label, drop) for out, drop in zip(outs, drops,
                                                                         strict=True))
            changes = [line for line in difflib.unified_diff(before, after, n=0, lineterm="")
                       if not line.startswith(("---", "+++", "@@"))]
            print(f"-- {label}: " + (f"{len(changes)} lines differ" if changes else "same"))
            for line, count in _collapsed(changes, full=args.full):
                print("   " + line + (f"   (x{count})" if count > 1 else ""))
    return 0


def _collapsed(changes: list[str], *, full: bool) -> list[tuple[str, int]]:
    """The changed lines, a list's index as ``[*]`` and equal lines counted (unless
    ``full``)."""
    counts: dict[str, int] = {}
    for line in changes:
        key = line if full else re.sub(r"\[\d+\]", "[*]", line)
        counts[key] = counts.get(key, 0) + 1
    return list(counts.items())


def _worktree(repo: Path, path: Path, rev: str) -> Path:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(path), rev],
                       check=True, stdout=subprocess.DEVNULL)
    return path


def _fault_project(root: Path) -> None:
    (root / "matrices").mkdir(parents=True, exist_ok=True)
    (root / "checks").mkdir(exist_ok=True)
    (root / "pyproject.toml").write_text("[tool.harness]\n")
    (root / "matrices" / "faults.yaml").write_text(_FAULT_MATRIX)
    (root / "checks" / "test_crash.py").write_text(_CRASH)
    (root / "checks" / "test_hang.py").write_text(_HANG)


def _run(name: str, checkout: Path, side_dir: Path, *, matrices: Path) -> None:
    """The scenario's run (once: a folder that has its exit code is kept), then its history
    and the nightly report over it (its never-run lanes from one folder of matrices on both
    sides, the first side's: a lane added between the commits is no difference of theirs)."""
    where, command = SCENARIOS[name]
    root = checkout if where == "checkout" else side_dir / where
    out = side_dir / "out" / name
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(checkout),
           "HARNESS_HISTORY": str(out / "history.sqlite")}
    harness = [sys.executable, "-m", "harness", "--root", str(root)]
    with (out / "log.txt").open("a") as log:
        if not (out / "exit_code").is_file():
            code = subprocess.run([*harness, *command, "--reports", str(out / "reports")],
                                  cwd=root, env=env, stdout=log,
                                  stderr=subprocess.STDOUT).returncode
            (out / "exit_code").write_text(f"{code}\n")
        (out / "history.sqlite").unlink(missing_ok=True)
        for step in (["history", "ingest", str(out / "reports")],
                     ["report", "nightly", "--out", str(out / "nightly"),
                      "--matrices", str(matrices)]):
            subprocess.run([*harness, *step], cwd=root, env=env, stdout=log,
                           stderr=subprocess.STDOUT, check=False)
    print(f"{side_dir.name} {name}: exit {(out / 'exit_code').read_text().strip()}", flush=True)


def _report_lanes(out: Path) -> set[str]:
    """The lanes a scenario's report names (the runs' and the matrices' folder's)."""
    path = out / "nightly" / "report.json"
    lanes = json.loads(path.read_text())["lanes"] if path.is_file() else []
    return {lane["name"] for lane in lanes}


def _flat(out: Path, label: str, drop: set[str]) -> list[str]:
    """A file of the scenario's run as sorted ``path = value`` lines, masked; the report
    without the lanes in ``drop``, those the other side does not name (a matrix one commit
    ships and the other does not)."""
    roots = {str(out.parent.parent / "checkout"): "<CHECKOUT>", str(out): "<OUT>",
             str(out.parent.parent / "faults"): "<PROJECT>", str(Path.home()): "<HOME>"}
    if label == "report.json":
        files = [out / "nightly" / "report.json"]
    else:
        files = sorted((out / "reports").glob(f"*/*/{label}"))
    if not files or not files[-1].is_file():
        return [f"(no {label})"]
    text = files[-1].read_text(errors="replace")
    if label == "report.json":
        lines = list(_walk(_only(json.loads(text), drop), ""))
    elif label.endswith(".json"):
        lines = list(_walk(json.loads(text), ""))
    else:
        lines = list(_xml(ET.fromstring(text), ""))
    exit_code = out / "exit_code"
    if label == "manifest.json" and exit_code.is_file():
        lines.append(f"harness exit code = {exit_code.read_text().strip()}")
    return sorted(_mask(line, roots)[:4000] for line in lines)


def _only(value: object, drop: set[str]) -> object:
    """``value`` without what names a lane in ``drop``: a key, a row whose ``lane`` or
    ``name`` it is, a pair that starts with it."""
    if isinstance(value, dict):
        return {k: _only(v, drop) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        def named(item: object) -> bool:
            if isinstance(item, dict):
                return item.get("lane") in drop or item.get("name") in drop
            return isinstance(item, list) and bool(item) and item[0] in drop
        return [_only(item, drop) for item in value if not named(item)]
    return value


def _walk(value: object, path: str) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if _VOLATILE_KEY.search(str(key)) and not isinstance(item, dict | list):
                yield f"{path}.{key} = <masked>"
            else:
                yield from _walk(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")
    else:
        yield f"{path} = {json.dumps(value)}"


def _xml(element: ET.Element, path: str) -> Iterator[str]:
    here = f"{path}/{element.tag}"
    name = element.get("name") or element.get("classname")
    if name:
        here += f"[{element.get('classname', '')}::{element.get('name', '')}]"
    property_name = element.get("name", "") if element.tag == "property" else ""
    for key, value in sorted(element.attrib.items()):
        masked = _VOLATILE_KEY.search(key) is not None or (
            key == "value" and _VOLATILE_KEY.search(property_name) is not None)
        yield f"{here} @{key} = {'<masked>' if masked else value}"
    text = (element.text or "").strip()
    if text:
        yield f"{here} text = {text!r}"
    for child in element:
        yield from _xml(child, here)


def _mask(line: str, roots: dict[str, str]) -> str:
    for path, placeholder in sorted(roots.items(), key=lambda kv: -len(kv[0])):
        line = line.replace(path, placeholder)
    for pattern, replacement in _PATTERNS:
        line = pattern.sub(replacement, line)
    return line


if __name__ == "__main__":
    sys.exit(main())
