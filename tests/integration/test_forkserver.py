"""Suites forked from one process that imported the engine once (`runtime.preload`), end to
end through `harness run`: each suite in a process of its own, the import paid once; a
suite that dies of a signal or hangs takes only itself and is recorded as a fresh
process's would be; a server that cannot fork safely is said, and the suites run fresh."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from harness.results.manifest import RunRecord
from harness.roots import project_root
from tests.runs import own_suites_matrix

ROOT = project_root()

ENGINE = """
import os, pathlib, time
print("[WARNING engine] logged to stdout while importing, as vLLM's logger does")
time.sleep(1.0)  # an engine's import: paid once by the server, never by a suite
pathlib.Path(os.environ["ENGINE_LOG"]).open("a").write(f"{os.getpid()}\\n")
"""

THREADED_ENGINE = """
import threading, time
threading.Thread(target=time.sleep, args=(600,), name="engine-poller", daemon=True).start()
"""

WHO = """
import json, os, sys

def test_who():
    line = {{"suite": "{name}", "pid": os.getpid(), "ppid": os.getppid(),
             "engine": "fake_engine" in sys.modules, "tier": os.environ.get("HARNESS_TIER")}}
    with open(os.environ["WHO_LOG"], "a") as out:
        out.write(json.dumps(line) + "\\n")
"""

DIES = """
import os, signal

os.kill(os.getpid(), signal.SIGILL)  # as vLLM's _C import on a CPU without AVX-512

def test_never():
    pass
"""

HANGS = """
import time

def test_first():
    pass

def test_hangs():
    time.sleep(600)
"""


def scratch(tmp_path: Path, engine: str = ENGINE) -> Path:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "fake_engine.py").write_text(textwrap.dedent(engine))
    for name in ("a", "b", "c"):
        (suites / f"test_{name}.py").write_text(textwrap.dedent(WHO.format(name=name)))
    (suites / "test_dies.py").write_text(textwrap.dedent(DIES))
    (suites / "test_hangs.py").write_text(textwrap.dedent(HANGS))
    return own_suites_matrix(tmp_path / "forked.yaml", "forked", [
        *(f"  {name}: {{path: {suites / f'test_{name}.py'}, workers: 1, timeout_s: 120}}"
          for name in ("a", "dies", "b")),
        f"  hangs: {{path: {suites / 'test_hangs.py'}, workers: 1, timeout_s: 20}}",
        f"  c: {{path: {suites / 'test_c.py'}, workers: 1, timeout_s: 120}}",
    ], top=("runtime:", "  preload: [fake_engine]", "  env:",
            f"    ENGINE_LOG: {tmp_path / 'engine.log'}", f"    WHO_LOG: {tmp_path / 'who.log'}"))


def harness_run(tmp_path: Path, matrix: Path, *extra: str
                ) -> tuple[subprocess.CompletedProcess[str], Path]:
    reports = tmp_path / "reports"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--matrix", str(matrix),
                           "--python", "current", "--local", "--reports", str(reports), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    (run_dir,) = (reports / "forked").iterdir()
    return done, run_dir


def test_each_suite_forked_from_one_import_and_a_crash_or_hang_takes_only_itself(
        tmp_path: Path) -> None:
    done, run_dir = harness_run(tmp_path, scratch(tmp_path))
    said = done.stdout + done.stderr
    assert "fork server ready: imported fake_engine" in said, said[-3000:]
    # the import ran once, in the server
    (server,) = [int(x) for x in (tmp_path / "engine.log").read_text().split()]
    who = [json.loads(x) for x in (tmp_path / "who.log").read_text().splitlines()]
    assert [w["suite"] for w in who] == ["a", "b", "c"]
    # each suite in a process of its own, forked from the server, the engine already there,
    # its suite's own environment
    assert len({w["pid"] for w in who}) == 3 and {w["ppid"] for w in who} == {server}
    assert all(w["engine"] and w["tier"] == "full" for w in who)

    record = RunRecord.read(run_dir)
    by_name = {s.suite: s for s in record.suites}
    assert [by_name[n].status.value for n in ("a", "dies", "b", "hangs", "c")] == [
        "passed", "crashed", "passed", "timeout", "passed"]
    # the crash as a fresh process's: killed by its own signal, a finding; the timeout's
    # infrastructure exit wins the run's (3; docs/contracts.md)
    dies = by_name["dies"]
    assert dies.cause is not None and dies.cause.signal == "SIGILL", dies
    assert "crashed: killed by SIGILL" in dies.reason
    assert done.returncode == 3, said[-3000:]
    # the hang: stopped at its timeout, the test before it kept
    hangs = by_name["hangs"]
    assert hangs.counts.passed == 1 and "test_hangs" in hangs.reason, hangs
    # nothing of the stopped child is left behind
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "suites")], capture_output=True,
                          text=True, check=False)
    assert not left.stdout.strip(), left.stdout


def test_a_server_that_cannot_fork_safely_is_said_and_the_suites_run_fresh(
        tmp_path: Path) -> None:
    done, run_dir = harness_run(tmp_path, scratch(tmp_path, THREADED_ENGINE))
    said = done.stdout + done.stderr
    assert ("fork server unsafe: Python threads running: engine-poller; the suites run in "
            "fresh processes") in said, said[-3000:]
    who = [json.loads(x) for x in (tmp_path / "who.log").read_text().splitlines()]
    assert [w["suite"] for w in who] == ["a", "b", "c"]
    assert not any(w["engine"] for w in who)  # fresh: nothing preloaded
    statuses = {s.suite: s.status.value for s in RunRecord.read(run_dir).suites}
    assert statuses == {"a": "passed", "dies": "crashed", "b": "passed", "hangs": "timeout",
                        "c": "passed"}


OPENMP_ENGINE = """
import torch

torch.ones(1 << 22).add_(1).sum()  # a parallel region in the server, before any fork
"""


def test_an_openmp_region_before_the_fork_is_found_by_the_canary(tmp_path: Path) -> None:
    """torch's CPU build (GNU OpenMP): a child forked after a parallel region hangs in its
    next one; the server's canary finds it and the suites run fresh. One worker, so that
    the thread budget gives torch two threads (with one, no region is parallel: safe)."""
    done, run_dir = harness_run(tmp_path, scratch(tmp_path, OPENMP_ENGINE), "--workers", "1")
    said = done.stdout + done.stderr
    assert "fork server unsafe: a forked child's parallel kernel hung past" in said, \
        said[-3000:]
    statuses = {s.suite: s.status.value for s in RunRecord.read(run_dir).suites}
    assert statuses["a"] == statuses["b"] == statuses["c"] == "passed"


TORCH_ENGINE = """
import os, pathlib
import torch  # imported, no parallel region run before the fork: safe to fork

pathlib.Path(os.environ["ENGINE_LOG"]).open("a").write(f"{os.getpid()}\\n")
"""

TORCH_WHO = """
import json, os, sys

def test_who():
    import torch
    total = float(torch.ones(1 << 22).add_(1).sum())  # a parallel kernel in the fork
    line = {{"suite": "{name}", "pid": os.getpid(), "ppid": os.getppid(),
             "engine": "torch" in sys.modules and "fake_engine" in sys.modules,
             "total": total}}
    with open(os.environ["WHO_LOG"], "a") as out:
        out.write(json.dumps(line) + "\\n")
"""


def test_a_server_that_imported_torch_forks_safely_and_its_children_run_torch(
        tmp_path: Path) -> None:
    """The safe side of the canary: torch imported, no parallel region before the fork; the
    canary's kernel ends in time, so the server is ready, and each suite, forked from it,
    runs a parallel kernel of its own (two threads: one worker on the budget)."""
    matrix = scratch(tmp_path, TORCH_ENGINE)
    for name in ("a", "b", "c"):
        (tmp_path / "suites" / f"test_{name}.py").write_text(
            textwrap.dedent(TORCH_WHO.format(name=name)))
    done, run_dir = harness_run(tmp_path, matrix, "--workers", "1")
    said = done.stdout + done.stderr
    assert "fork server ready: imported fake_engine" in said, said[-3000:]
    (server,) = [int(x) for x in (tmp_path / "engine.log").read_text().split()]
    who = [json.loads(x) for x in (tmp_path / "who.log").read_text().splitlines()]
    assert [w["suite"] for w in who] == ["a", "b", "c"]
    assert {w["ppid"] for w in who} == {server} and all(w["engine"] for w in who)
    assert all(w["total"] == 2.0 * (1 << 22) for w in who)
    statuses = {s.suite: s.status.value for s in RunRecord.read(run_dir).suites}
    assert statuses["a"] == statuses["b"] == statuses["c"] == "passed"
