"""The op knock-out (harness/plugin/knockout.py) for real: a small suite whose conftest
defines a real op library with torch.library, run by pytest in a subprocess through the
plugin, with and without HARNESS_KNOCK_OUT. A knocked-out op raises however it is called
(the packet, an overload, a CompositeImplicitAutograd kernel, an op whose library is only
imported inside the test), the tests that do not call it pass, and the JUnit file holds
each test's ``knocked_out`` and ``knock_out_hits``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
MESSAGE = "harness knock-out: {} is knocked out (HARNESS_KNOCK_OUT)"

CONFTEST = '''
import torch

LIB = torch.library.Library("harness_ko_test", "DEF")
LIB.define("myop(Tensor x) -> Tensor")
LIB.impl("myop", lambda x: x * 2, "CPU")
LIB.define("cia(Tensor x) -> Tensor")
LIB.impl("cia", lambda x: x + 1, "CompositeImplicitAutograd")
'''

LATE = '''
import torch

LIB = torch.library.Library("harness_ko_late", "DEF")
LIB.define("myop(Tensor x) -> Tensor")
LIB.impl("myop", lambda x: x * 3, "CPU")
'''

TESTS = '''
import torch


def test_calls_the_op():
    assert torch.ops.harness_ko_test.myop(torch.ones(2)).sum() == 4


def test_calls_its_overload():
    assert torch.ops.harness_ko_test.myop.default(torch.ones(2)).sum() == 4
    assert torch.ops.harness_ko_test.myop.default(torch.ones(2)).sum() == 4


def test_calls_a_composite_op():
    assert torch.ops.harness_ko_test.cia(torch.ones(2, requires_grad=True)).sum() == 4


def test_imports_a_library_then_calls_its_op():
    import late_ops  # defines harness_ko_late::myop: after this test's setup

    assert torch.ops.harness_ko_late.myop(torch.ones(2)).sum() == 6


def test_calls_no_op():
    assert torch.ones(2).sum() == 2
'''


def _run(suite: Path, knock_out: str | None, *args: str) -> tuple[subprocess.CompletedProcess[str],
                                                                   dict[str, ET.Element]]:
    """pytest on ``suite`` through the plugin; the process and its JUnit cases by name."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("HARNESS_KNOCK_OUT", None)
    if knock_out is not None:
        env["HARNESS_KNOCK_OUT"] = knock_out
    junit = suite / f"junit-{len(list(suite.glob('junit-*.xml')))}.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "harness.pytest_entry", "-p", "no:cacheprovider",
         "-o", "addopts=", "-q", f"--junitxml={junit}", "--rootdir", str(suite), *args,
         str(suite)], cwd=suite, env=env, capture_output=True, text=True, timeout=300,
        check=False)
    cases = {c.get("name", ""): c for c in ET.parse(junit).iter("testcase")} \
        if junit.is_file() else {}
    return done, cases


def _props(case: ET.Element) -> dict[str, str]:
    return {p.get("name", ""): p.get("value", "") for p in case.iter("property")}


def _failure(case: ET.Element) -> str:
    found = case.find("failure")
    return found.get("message", "") if found is not None else ""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    for name, text in (("conftest.py", CONFTEST), ("late_ops.py", LATE),
                       ("test_ko.py", TESTS)):
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def test_without_the_variable_every_test_passes_and_no_property_is_written(
        suite: Path) -> None:
    done, cases = _run(suite, None)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert len(cases) == 5
    assert not any(_props(c) for c in cases.values())


def test_a_knocked_out_op_raises_by_every_path_and_the_other_tests_pass(suite: Path) -> None:
    ops = "harness_ko_test::myop,harness_ko_test::cia,harness_ko_late::myop"
    done, cases = _run(suite, f"{ops},harness_ko_test::absent")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    expected = {"test_calls_the_op": "harness_ko_test::myop",
                "test_calls_its_overload": "harness_ko_test::myop",
                "test_calls_a_composite_op": "harness_ko_test::cia",
                "test_imports_a_library_then_calls_its_op": "harness_ko_late::myop"}
    for name, op in expected.items():
        assert _failure(cases[name]) == f"RuntimeError: {MESSAGE.format(op)}", name
        assert _props(cases[name])["knock_out_hits"] == f"{op}=1", name
    assert cases["test_calls_no_op"].find("failure") is None
    no_op = _props(cases["test_calls_no_op"])
    assert "knock_out_hits" not in no_op  # a test that never met the raiser
    # knocked out when each test ended: the late library's op from the test that imported
    # it on (the import hook knocked it out mid-test, after that test's setup)
    everything = ",".join(sorted(ops.split(",")))
    assert _props(cases["test_calls_a_composite_op"])["knocked_out"] == \
        "harness_ko_test::cia,harness_ko_test::myop"
    assert _props(cases["test_imports_a_library_then_calls_its_op"])["knocked_out"] == everything
    assert no_op["knocked_out"] == everything
    assert ("harness knock-out: harness_ko_test::absent was never loaded in this process"
            in done.stderr.splitlines())


def test_under_xdist_each_worker_knocks_out_and_the_controller_names_what_none_loaded(
        suite: Path) -> None:
    done, cases = _run(suite, "harness_ko_test::myop,harness_ko_test::absent", "-n", "2")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    failed = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failed == {"test_calls_the_op", "test_calls_its_overload"}
    assert _props(cases["test_calls_its_overload"])["knock_out_hits"] == \
        "harness_ko_test::myop=1"
    assert ("harness knock-out: harness_ko_test::absent was never loaded in any of the 2 "
            "worker processes" in done.stderr.splitlines())


def test_a_malformed_name_is_a_usage_error_naming_the_variable(suite: Path) -> None:
    done, _ = _run(suite, "harness_ko_test::myop,myop")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert ("ERROR: HARNESS_KNOCK_OUT: 'myop' is not a namespace::op name (e.g. _C::rms_norm)"
            in done.stderr.splitlines())
