"""The op record's pytest side (harness/plugin/ops.py ``OpRecord``) in a real pytest run of a
small suite made here, with the plugin as ``harness run`` loads it (``--harness-partial``):
each test's ``ops`` property in the sidecar, and the engine's surface written beside it, by
the test process itself and, under xdist, by the controller from its workers. The suite
registers an op through torch.library (as an engine does) and runs refengine's torch
provider through the registry. tests/integration/test_op_record.py runs vLLM's ops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.results.layout import engine_ops_for_partial
from harness.results.op_record import parse

CONFTEST = """
import torch

LIB = torch.library.Library("harness_opplug", "DEF")
LIB.define("twice(Tensor x) -> Tensor")
LIB.impl("twice", lambda x: x * 2, "CPU")
"""

TESTS = """
import torch

from refengine.registry import Registry


def test_packet_twice():
    x = torch.ones(2)
    torch.ops.harness_opplug.twice(x)
    torch.ops.harness_opplug.twice(x)


def test_overload_once():
    torch.ops.harness_opplug.twice.default(torch.ones(2))


def test_torch_alone():
    torch.ones(2) + 1


def test_refengine_registry():
    registry = Registry({"silu_and_mul": ["torch"]}, use_env=False)
    registry.run("silu_and_mul", torch.ones(2, 4))
"""


def _run(tmp_path: Path, *extra: str, env: dict[str, str] | None = None,
         files: dict[str, str] | None = None) -> Path:
    """``files`` (default: the op suite) run by pytest with the plugin as a run loads it."""
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    for name, text in (files or {"conftest.py": CONFTEST, "test_calls.py": TESTS}).items():
        (suite / name).write_text(textwrap.dedent(text))
    partial = tmp_path / "out" / "suite.partial.jsonl"
    partial.parent.mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pytest", str(suite), "-q", "-p",
                           "no:cacheprovider", f"--harness-partial={partial}",
                           f"--junitxml={tmp_path / 'out' / 'suite.xml'}", *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return partial


def _records(partial: Path) -> dict[str, dict[str, int]]:
    out = {}
    for line in partial.read_text().splitlines():
        record = json.loads(line)
        out[record["nodeid"].split("::")[-1]] = parse(record["properties"].get("ops", ""))
    return out


EXPECTED = {"test_packet_twice": {"harness_opplug::twice": 2},
            "test_overload_once": {"harness_opplug::twice": 1},
            "test_torch_alone": {}}


@pytest.mark.parametrize("workers", [[], ["-n", "2"], ["-p", "no:xdist"]],
                         ids=["one-process", "xdist", "without-xdist"])
def test_each_test_s_calls_and_the_engine_s_surface(tmp_path: Path, workers: list[str]) -> None:
    partial = _run(tmp_path, *workers)
    records = _records(partial)
    for name, expected in EXPECTED.items():
        assert records[name] == expected, (name, records[name])
    assert records["test_refengine_registry"] == {"torch/silu_and_mul": 1}
    surface = json.loads(engine_ops_for_partial(partial).read_text())
    assert list(surface) == sorted(surface)  # written in key order
    # the op the suite registered, at its registration place (this conftest, no machine part)
    assert "harness_opplug::twice" in surface
    assert "aten::add" not in surface and not any(k.startswith("aten::") for k in surface)
    assert surface["torch/silu_and_mul"] == "refengine provider refengine.providers.torch_provider"
    assert engine_ops_for_partial(partial).read_text().endswith("}\n")


def test_off_records_nothing(tmp_path: Path) -> None:
    partial = _run(tmp_path, env={"HARNESS_OP_RECORD": "off"})
    assert all(not ops for ops in _records(partial).values())
    assert not engine_ops_for_partial(partial).exists()


def test_a_suite_that_offers_no_op_writes_no_surface(tmp_path: Path) -> None:
    """No torch, no refengine: each test's record is empty and no surface file is written."""
    partial = _run(tmp_path, files={"test_plain.py": "def test_nothing():\n"
                                                     "    assert 1 + 1 == 2\n"})
    assert _records(partial) == {"test_nothing": {}}
    assert not engine_ops_for_partial(partial).exists()
