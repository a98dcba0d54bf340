"""Which tests a repro runs: the failed ones of a JUnit file, or those ``--test`` names.

Node ids come from the plugin's partial JSON-lines file when it is there (pytest's
own ids, exact). Without it they are rebuilt from JUnit ``classname`` + ``name`` and
``file``, and only trusted when the test file exists in this checkout.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError, UsageError
from harness.results.junit_write import read_partial

_BAD = frozenset({"failure", "error"})


@dataclass(frozen=True, kw_only=True)
class SuiteTests:
    """One JUnit file's tests: every node id seen, the failed ones, and why the whole
    suite must run instead (a harness-made error case, or a case that is no test)."""

    suite: str
    shard: str | None
    all_ids: tuple[str, ...]
    failed: tuple[str, ...]
    whole: str | None = None


def partial_path(junit: Path) -> Path:
    return junit.with_name(junit.stem + ".partial.jsonl")


def shard_of(junit: Path) -> tuple[str, str | None]:
    """``fusion-shard-2-of-4.xml`` -> ("fusion", "2/4")."""
    stem, sep, rest = junit.stem.rpartition("-shard-")
    index, _, total = rest.partition("-of-")
    if sep and index.isdigit() and total.isdigit():
        return stem, f"{index}/{total}"
    return junit.stem, None


def node_id(classname: str, name: str, file: str, root: Path) -> str | None:
    """``suites.x.test_y.TestA`` + ``test_b[p]`` -> ``suites/x/test_y.py::TestA::test_b[p]``."""
    parts = classname.split(".") if classname else []
    path, classes = "", []
    if file.endswith(".py"):
        path = file.replace("\\", "/")
        stem = Path(path).stem
        if stem in parts:
            classes = parts[len(parts) - parts[::-1].index(stem) :]
    else:
        for end in range(len(parts), 0, -1):
            candidate = "/".join(parts[:end]) + ".py"
            if (root / candidate).is_file():
                path, classes = candidate, parts[end:]
                break
    if not path or not (root / path).is_file():
        return None
    return "::".join([path, *classes, name])


def _unique(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))


def read_suite(junit: Path, root: Path) -> SuiteTests:
    try:
        tree = ET.parse(junit)
    except (OSError, ET.ParseError) as error:
        raise ConfigError(f"cannot read JUnit: {error}", file=str(junit)) from None
    suite_el = next(tree.getroot().iter("testsuite"), tree.getroot())
    stem_suite, shard = shard_of(junit)
    suite = suite_el.get("name") or stem_suite
    if suite in ("pytest", "pytest tests"):  # pytest's default name: no junit_suite_name
        suite = stem_suite
    partial = partial_path(junit)
    records = read_partial(partial)  # [] when absent
    known = _unique(str(r["nodeid"]) for r in records if "nodeid" in r)
    failed = [str(r["nodeid"]) for r in records if r.get("outcome") == "failed"]
    converted: list[str] = []
    whole: str | None = None
    for case in suite_el.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        bad = any(child.tag in _BAD for child in case)
        if classname == f"harness.{suite}":
            whole = whole or name  # "<suite>: crashed: ...", written by the runner
            continue
        nid = node_id(classname, name, case.get("file", ""), root)
        if nid is not None:
            converted.append(nid)
        if not bad or (nid is not None and nid in known):
            continue
        if nid is None:
            label = f"{classname}::{name}" if classname else name
            whole = whole or f"{label} is not a test of this checkout (a collection error?)"
        elif not records:
            failed.append(nid)
        else:
            # pytest reported it without running it (a collection error, say).
            whole = whole or f"{nid} failed outside a test"
    return SuiteTests(
        suite=suite,
        shard=shard,
        all_ids=_unique([*known, *converted]),
        failed=_unique(failed),
        whole=whole,
    )


def _suite_of(test_file: str, suite_paths: Mapping[str, str]) -> str | None:
    target = Path(test_file)
    for suite, path in suite_paths.items():
        if target == Path(path) or Path(path) in target.parents:
            return suite
    return None


def pick_tests(
    wanted: Sequence[str],
    recorded: Sequence[SuiteTests],
    suite_paths: Mapping[str, str],
    root: Path,
) -> dict[str, tuple[str, ...]]:
    """``--test`` values: a value with ``::`` is a node id (its file must exist here);
    any other value is a substring of the node ids the run recorded (all of them)."""
    chosen: dict[str, list[str]] = {}
    for value in wanted:
        if "::" in value:
            test_file = value.split("::", 1)[0]
            if not (root / test_file).is_file():
                raise UsageError(f"--test {value}: {test_file} is not in this checkout")
            suite = _suite_of(test_file, suite_paths)
            if suite is None:
                raise UsageError(
                    f"--test {value}: {test_file} is in none of the matrix's suites "
                    f"({', '.join(f'{s}: {p}' for s, p in suite_paths.items())})"
                )
            chosen.setdefault(suite, []).append(value)
            continue
        hits = [(s.suite, nid) for s in recorded for nid in s.all_ids if value in nid]
        if not hits:
            raise UsageError(f"--test {value}: matches none of the run's tests")
        for suite, nid in hits:
            chosen.setdefault(suite, []).append(nid)
    return {suite: _unique(ids) for suite, ids in chosen.items()}
