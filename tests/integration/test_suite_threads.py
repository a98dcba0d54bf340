"""A suite that runs fewer workers than the run planned gets the CPUs over its own workers
as threads (run/plan.py), records them (SuiteOutcome.threads), and `harness repro` gives it
the same; the run's other suites keep the run's count."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.platform.budget import cpu_budget
from harness.results.manifest import RunRecord
from harness.roots import project_root
from harness.run.threads import THREAD_VARS
from tests.runs import own_suites_matrix

SUITE = """
import os
from pathlib import Path


def test_threads():
    with open(os.environ["THREADS_OUT"], "a") as out:
        out.write(f"{Path(__file__).parent.name} {os.environ['OMP_NUM_THREADS']}\\n")
"""


def harness(*args: str, out: Path) -> subprocess.CompletedProcess[str]:
    """harness with the thread variables its own to set (a shell that set them keeps them)."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS} | {"THREADS_OUT": str(out)}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=project_root(),
                          env=env, capture_output=True, text=True, timeout=600, check=False)


def test_a_one_worker_suite_gets_every_cpu_and_repro_keeps_it(tmp_path: Path) -> None:
    cpus = cpu_budget().cpus
    if cpus < 2:
        pytest.skip(f"needs 2 CPUs to tell one worker's threads from two's; this host has {cpus}")
    folders = []
    for name in ("one", "many"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"test_{name}.py").write_text(textwrap.dedent(SUITE))
        folders.append(folder)
    matrix = own_suites_matrix(tmp_path / "threads.yaml", "threads", [
        f"  one: {{path: {folders[0]}, workers: 1, timeout_s: 300}}",
        f"  many: {{path: {folders[1]}, workers: auto, timeout_s: 300}}"])
    out = tmp_path / "threads.txt"
    done = harness("run", "--matrix", str(matrix), "--python", "current", "--local",
                   "--workers", "2", "--reports", str(tmp_path / "reports"), out=out)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    seen = dict(line.split() for line in out.read_text().splitlines())
    assert seen == {"one": str(cpus), "many": str(cpus // 2)}, seen
    (run_dir,) = (tmp_path / "reports" / "threads").iterdir()
    threads = {s.suite: s.threads for s in RunRecord.read(run_dir).suites}
    assert threads == {"one": cpus, "many": None}

    out.unlink()
    again = harness("repro", str(run_dir), "--test", "test_one.py::test_threads", "--python",
                    "current", "--local", "--reports", str(tmp_path / "again"), out=out)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert out.read_text().split() == ["one", str(cpus)]
