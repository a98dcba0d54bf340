"""Which tests a repro runs: the failed ones of a JUnit file, or those ``--test`` names.

Node ids are pytest's own, as the plugin recorded them in the JUnit file's sidecar (the
partial file beside it; a salvaged file has one too) or, in xunit1, as a case property.
A file without them (another producer's, or one copied away from its sidecar) has its
ids rebuilt from ``classname`` + ``name`` (+ ``file``) by the JUnit reader, and only
trusted when they name a test file of this checkout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError, UsageError
from harness.matrix.suite_paths import SuitePlace
from harness.results import layout
from harness.results.case_meaning import FINDINGS
from harness.results.junit_read import NODEID_PROPERTY, JunitReader


@dataclass(frozen=True, kw_only=True)
class SuiteTests:
    """One JUnit file's tests: every node id seen, the failed ones, and why the whole
    suite must run instead (a harness-made error case, or a case that is no test)."""

    suite: str
    shard: str | None
    all_ids: tuple[str, ...]
    failed: tuple[str, ...]
    whole: str | None = None


def read_suite(junit: Path, root: Path, rootdirs: Mapping[str, Path] | None = None) -> SuiteTests:
    """The tests of one JUnit file, read with the one JUnit reader. ``root`` is the folder
    node ids are relative to; ``rootdirs`` overrides it per suite (a suite outside the
    checkout has its own rootdir)."""
    problems: list[str] = []
    cases = list(JunitReader(junit, problems.append))
    if problems and not cases:
        raise ConfigError(f"cannot read JUnit: {problems[0]}", file=str(junit))
    stem_suite, shard = layout.suite_of(junit)
    suite = next((c.suite for c in cases), stem_suite)
    if suite in ("pytest", "pytest tests"):  # pytest's default name: no junit_suite_name
        suite = stem_suite
    root = (rootdirs or {}).get(suite, root)
    ids: list[str] = []
    failed: list[str] = []
    whole: str | None = None
    for case in cases:
        if case.nodeid.startswith(f"harness.{suite}::"):
            # "<suite>: crashed: ...", the case a runner adds for a crash or a timeout
            whole = whole or case.nodeid.partition("::")[2]
            continue
        recorded = NODEID_PROPERTY in case.properties
        # pytest's own id as the plugin recorded it; another producer's id only when it
        # names a test file of this checkout.
        nid = (case.nodeid if recorded or _in_checkout(case.nodeid, root)
               else _from_checkout(case.nodeid, root))
        if nid is not None:
            ids.append(nid)
        if case.status not in FINDINGS:
            continue
        if nid is None:
            whole = whole or f"{case.nodeid} is not a test of this checkout (a collection error?)"
        else:
            failed.append(nid)
    return SuiteTests(
        suite=suite, shard=shard, all_ids=_unique(ids), failed=_unique(failed), whole=whole
    )


def _unique(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))


def _in_checkout(nodeid: str, root: Path) -> bool:
    test_file = nodeid.split("::", 1)[0]
    return test_file.endswith(".py") and (root / test_file).is_file()


def _from_checkout(nodeid: str, root: Path) -> str | None:
    """A rebuilt id whose test file was only guessed (xunit2 JUnit has no ``file``
    attribute): its dotted name split where a test file of this checkout is, the longest
    such path first (``tests.suite.check_x.TestA.test_y`` -> ``tests/suite/check_x.py::
    TestA::test_y`` when that file exists)."""
    head, bracket, params = nodeid.partition("[")
    parts = head.replace(".py::", ".").replace("::", ".").replace("/", ".").split(".")
    for end in range(len(parts) - 1, 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (root / path).is_file():
            return "::".join([path, *parts[end:]]) + bracket + params
    return None


def _suite_of(test_file: str, places: Mapping[str, SuitePlace]) -> str | None:
    for suite, place in places.items():
        target = (place.rootdir / test_file).resolve()
        where = place.target.resolve()
        if target.is_file() and (target == where or where in target.parents):
            return suite
    return None


def pick_tests(
    wanted: Sequence[str],
    recorded: Sequence[SuiteTests],
    places: Mapping[str, SuitePlace],
    root: Path,
) -> dict[str, tuple[str, ...]]:
    """``--test`` values: a value with ``::`` is a node id (its file must exist here,
    relative to its suite's rootdir, :func:`harness.matrix.suite_paths.suite_place`); any
    other value is a substring of the node ids the run recorded (all of them)."""
    chosen: dict[str, list[str]] = {}
    for value in wanted:
        if "::" in value:
            test_file = value.split("::", 1)[0]
            here = [p.rootdir / test_file for p in places.values()] + [root / test_file]
            if not any(path.is_file() for path in here):
                raise UsageError(f"--test {value}: {test_file} is not in this checkout")
            suite = _suite_of(test_file, places)
            if suite is None:
                raise UsageError(
                    f"--test {value}: {test_file} is in none of the matrix's suites "
                    f"({', '.join(f'{s}: {_shown(p, root)}' for s, p in places.items())})"
                )
            chosen.setdefault(suite, []).append(value)
            continue
        hits = [(s.suite, nid) for s in recorded for nid in s.all_ids if value in nid]
        if not hits:
            raise UsageError(f"--test {value}: matches none of the run's tests")
        for suite, nid in hits:
            chosen.setdefault(suite, []).append(nid)
    return {suite: _unique(ids) for suite, ids in chosen.items()}


def _shown(place: SuitePlace, root: Path) -> str:
    """A suite's path for the line: relative to the project root where it lies under it,
    else whole (a shipped suite, one outside the project)."""
    try:
        return place.target.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(place.target)
