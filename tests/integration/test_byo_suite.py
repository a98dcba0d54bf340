"""Bring your own suite: an engine's own test tree, outside the checkout, under a user
matrix (also outside the checkout) that extends the shipped ``cpu`` matrix by name.

The tree is written by the test into a temporary folder and has what engines' trees
have: unittest ``TestCase`` classes, tests decorated with a ``functools.wraps`` decorator
and with a context-manager decorator, a helper ``test_helper(model)`` at the tree's top
that the tests import, one module that fails to import, a package whose top-level name
shadows nothing, and 90% of its tests skipped behind an ImportError (names the released
wheel lacks). The same tree then runs under plain ``pytest --platform``.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.results.junit_write import read_partial
from harness.roots import project_root

ROOT = project_root()
SKIPPED_TESTS = 63  # behind the ImportError; 7 more cases run or error: 63 / 70 = 90%
LEFTOVER = ".byo-suite-leftover.txt"

HELPERS = '''
import contextlib
import functools


def test_helper(model):
    """Not a test: a helper the tests import (pytest would collect it and error)."""
    return [2 * x for x in model]


def with_seed(seed):
    def wrap(func):
        @functools.wraps(func)
        def inner(*args, **kwargs):
            return func(*args, **kwargs)
        inner.seed = seed
        return inner
    return wrap


class tracing(contextlib.ContextDecorator):
    entered = 0

    def __enter__(self):
        tracing.entered += 1
        return self

    def __exit__(self, *exc):
        return False
'''

UNITS = '''
import os
import pathlib
import unittest

from engine_utils import test_helper


class TestMath(unittest.TestCase):
    def test_add(self):
        self.assertEqual(test_helper([1, 2]), [2, 4])

    def test_sub_bug(self):
        self.assertEqual(3 - 1, 1, "the engine's deliberate bug")


class TestFiles(unittest.TestCase):
    def test_writes_into_the_harness_checkout(self):
        root = os.environ.get("HARNESS_ROOT")
        if root:  # only under `harness run`; a careless test writes where it should not
            pathlib.Path(root, "LEFTOVER").write_text("left behind")
'''.replace("LEFTOVER", LEFTOVER)

DECORATED = '''
from engine_utils import test_helper, tracing, with_seed


@with_seed(3)
def test_wrapped():
    assert test_helper([1]) == [2]


@tracing()
def test_in_context():
    assert tracing.entered >= 1


@with_seed(1)
def test_known_bad():
    assert test_helper([1]) == [3]
'''

BROKEN = '''
from engine_utils import removed_in_this_release  # ImportError at collection


def test_never_runs():
    pass
'''


def _new_ops() -> str:
    methods = "\n".join(
        f"    def test_fused_{i:02d}(self):\n        self.assertTrue(fused_op({i}))\n"
        for i in range(SKIPPED_TESTS)
    )
    return (
        "import unittest\n\n"
        "try:\n    from engine_utils import fused_op\n"
        "except ImportError:\n    fused_op = None\n\n\n"
        '@unittest.skipIf(fused_op is None, "engine wheel lacks fused_op")\n'
        f"class TestFusedOps(unittest.TestCase):\n{methods}"
    )


def write_tree(top: Path) -> Path:
    vendor = top / "vendor"
    package = vendor / "enginetests"
    package.mkdir(parents=True)
    (vendor / "engine_utils.py").write_text(HELPERS)
    (package / "__init__.py").write_text("")
    (package / "test_units.py").write_text(UNITS)
    (package / "test_decorated.py").write_text(DECORATED)
    (package / "test_broken.py").write_text(BROKEN)
    (package / "test_new_ops.py").write_text(_new_ops())
    return vendor


USER_MATRIX = """
extends: cpu
description: my engine's own unit tests on the host CPU
suites:
  engine:
    path: ../vendor                 # relative to this file
    workers: 1
    timeout_s: 600
    pytest_args: ["-o", "console_output_style=classic"]
known_failures:
  - id: enginetests/test_decorated.py::test_known_bad
    reason: helper rounds differently (engine issue 12)
    expires: 2099-01-01
  - id: test/unittests/enginetests/test_units.py::TestMath::test_add
    reason: written against the engine repository's root, not the suite's rootdir
    expires: 2099-01-01
"""


def line_of(text: str) -> int:
    return next(i for i, line in enumerate(USER_MATRIX.splitlines(), 1) if text in line)


@dataclass(frozen=True)
class Byo:
    vendor: Path
    matrix: Path
    run_dir: Path
    done: subprocess.CompletedProcess[str]


def harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd, capture_output=True, text=True, timeout=900, check=False,
    )


@pytest.fixture(scope="module")
def byo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Byo]:
    top = tmp_path_factory.mktemp("byo")
    vendor = write_tree(top)
    (top / "user").mkdir()
    matrix = top / "user" / "myengine.yaml"
    matrix.write_text(USER_MATRIX)
    leftover = ROOT / LEFTOVER
    try:
        done = harness(
            "run", "--matrix", str(matrix), "--suite", "engine", "--python", "current",
            "--workers", "2", "--reports", str(top / "reports"), "--", "--tb=short",
            cwd=top,
        )
    finally:
        leftover.unlink(missing_ok=True)
    (run_dir,) = (top / "reports" / "myengine").iterdir()
    yield Byo(vendor=vendor, matrix=matrix, run_dir=run_dir, done=done)


def ids_by_outcome(partial: Path) -> dict[str, str]:
    return {str(r["nodeid"]): str(r["outcome"]) for r in read_partial(partial)}


EXPECTED_FAILED = {
    "enginetests/test_units.py::TestMath::test_sub_bug": "failed",
    "enginetests/test_broken.py": "failed",
}


def test_a_foreign_tree_runs_with_its_import_failure_as_an_error_case(byo: Byo) -> None:
    out = byo.done.stdout
    assert byo.done.returncode == 1, out[-4000:] + byo.done.stderr[-2000:]
    assert "harness: --workers 2 capped to 1 for suite engine" in out
    junit = byo.run_dir / "junit" / "engine.xml"
    text = junit.read_text()
    # The module that fails to import is one error case with its traceback ...
    assert 'message="collection failure"' in text and "removed_in_this_release" in text
    outcomes = ids_by_outcome(byo.run_dir / "junit" / "engine.partial.jsonl")
    # ... and the rest ran: unittest classes, decorated tests, the imported helper not
    # collected as a test, the known failure an expected failure.
    assert {k: v for k, v in outcomes.items() if v == "failed"} == EXPECTED_FAILED
    assert outcomes["enginetests/test_units.py::TestMath::test_add"] == "passed"
    assert outcomes["enginetests/test_decorated.py::test_wrapped"] == "passed"
    assert outcomes["enginetests/test_decorated.py::test_in_context"] == "passed"
    assert outcomes["enginetests/test_decorated.py::test_known_bad"] == "xfailed"
    assert not [nid for nid in outcomes if nid.endswith("::test_helper")]
    assert sum(v == "skipped" for v in outcomes.values()) == SKIPPED_TESTS
    log = (byo.run_dir / "logs" / "engine.log").read_text()
    assert "console_output_style=classic --tb=short" in log.splitlines()[0]  # suite, then --


def test_the_suite_is_mostly_skipped_with_its_reasons(byo: Byo) -> None:
    manifest = json.loads((byo.run_dir / "manifest.json").read_text())
    (suite,) = manifest["suites"]
    assert suite["status"] == "failed" and suite["mostly_skipped"] is True
    assert suite["skip_ratio"] == pytest.approx(0.9)
    reasons = [{"reason": "engine wheel lacks fused_op", "count": SKIPPED_TESTS}]
    assert suite["skip_reasons"] == reasons
    assert manifest["exit_code"] == 1 and manifest["infra_error"] is None
    top = "engine: mostly skipped; top skip reasons: 63x engine wheel lacks fused_op"
    assert top in byo.done.stdout
    assert re.search(r"^engine\s+failed .*mostly skipped: 63 of 70 \(90%", byo.done.stdout, re.M)


def test_nothing_is_silent(byo: Byo) -> None:
    manifest = json.loads((byo.run_dir / "manifest.json").read_text())
    assert manifest["new_files"] == [LEFTOVER]
    assert f"harness: the run left 1 new file(s) in the checkout: {LEFTOVER}" in byo.done.stdout
    assert manifest["unmatched_known_failures"] == [
        {
            "suite": "engine",
            "rootdir": str(byo.vendor),
            "id": "test/unittests/enginetests/test_units.py::TestMath::test_add",
            "where": f"{byo.matrix}:{line_of('- id: test/unittests/')}",
        }
    ]
    assert (
        f"harness:   engine (rootdir {byo.vendor}): "
        "test/unittests/enginetests/test_units.py::TestMath::test_add" in byo.done.stdout
    )


def test_repro_failed_reruns_exactly_the_failures(byo: Byo, tmp_path: Path) -> None:
    done = harness(
        "repro", str(byo.run_dir), "--failed", "--python", "current",
        "--reports", str(tmp_path), cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    (rerun,) = (tmp_path / "myengine").iterdir()
    assert ids_by_outcome(rerun / "junit" / "engine.partial.jsonl") == EXPECTED_FAILED


def test_history_keys_are_pytests_node_ids(byo: Byo, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    done = harness("history", "ingest", str(byo.run_dir), "--db", str(db), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    with sqlite3.connect(db) as conn:
        keys = {row[0] for row in conn.execute("SELECT nodeid FROM tests")}
    assert keys == set(ids_by_outcome(byo.run_dir / "junit" / "engine.partial.jsonl"))


def test_plain_pytest_gives_the_same_ids_and_known_failure_matches(
    byo: Byo, tmp_path: Path
) -> None:
    partial = tmp_path / "plain.partial.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", f"--platform={byo.matrix}",
         "-p", "no:cacheprovider", f"--harness-partial={partial}", "-rA"],
        cwd=byo.vendor, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 1, done.stdout[-4000:]
    assert ids_by_outcome(partial) == ids_by_outcome(
        byo.run_dir / "junit" / "engine.partial.jsonl"
    )
    assert "XFAIL enginetests/test_decorated.py::test_known_bad" in done.stdout
    assert "known failure matched no test here (rootdir" in done.stdout
    # Under the shipped cpu matrix itself: the same ids; only the user's known failure
    # is not known there.
    shipped = tmp_path / "shipped.partial.jsonl"
    subprocess.run(
        [sys.executable, "-m", "pytest", "--platform", "cpu", "-p", "no:cacheprovider",
         f"--harness-partial={shipped}"],
        cwd=byo.vendor, capture_output=True, text=True, timeout=600, check=False,
    )
    expected = ids_by_outcome(partial) | {"enginetests/test_decorated.py::test_known_bad": "failed"}
    assert ids_by_outcome(shipped) == expected
