"""A test file that dies while pytest imports it (vLLM's test_cpu_fused_sampling.py imports
``vllm._C``, the AVX-512 BF16 build, and a CPU without AVX-512 kills it with SIGILL): a
``skip`` known failure naming the whole file keeps pytest from importing it where its host
condition holds (a collection skip with the entry's reason), and nowhere else (real
``harness run``, a real SIGILL)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.roots import project_root

ROOT = project_root()

DIES = "import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n\ndef test_never():\n    pass\n"
LIVES = "def test_lives():\n    assert True\n"


def _run(tmp_path: Path, host: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    (suite / "test_dies_on_import.py").write_text(DIES)
    (suite / "test_lives.py").write_text(LIVES)
    matrix = tmp_path / f"crash-{host}.yaml"
    matrix.write_text("\n".join([
        "extends: cpu.yaml",
        f"name: crash-{host}",
        "suites:",
        *(f"  {name}: {{enabled: false}}" for name in ("platform", "kernel_parity", "fusion",
                                                       "e2e")),
        f"  imports: {{path: {suite}, rootdir: {suite}, workers: 1, timeout_s: 300}}",
        "known_failures:",
        "  - id: test_dies_on_import.py",
        "    reason: dies of SIGILL while pytest imports it",
        "    expires: 2099-01-01",
        "    action: skip",
        "    host:",
        # every host of these tests has AVX2: the first condition holds here, the second not
        f"      {host}: [avx2]",
    ]) + "\n")
    reports = tmp_path / f"reports-{host}"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--matrix", str(matrix),
                           "--python", "current", "--local", "--reports", str(reports)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    (run_dir,) = (reports / f"crash-{host}").iterdir()
    return done, json.loads((run_dir / "manifest.json").read_text())


@pytest.mark.skipif(sys.platform != "linux" or "avx2" not in Path("/proc/cpuinfo").read_text(),
                    reason="the host condition reads an x86-64 CPU's flags")
def test_a_file_that_dies_on_import_is_skipped_whole_where_its_entry_holds(
        tmp_path: Path) -> None:
    done, manifest = _run(tmp_path, "cpu_flags")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    (suite,) = manifest["suites"]
    assert suite["counts"]["passed"] == 1 and suite["counts"]["skipped"] == 1, suite
    junit = (tmp_path / "reports-cpu_flags").glob("*/*/junit/imports.xml")
    text = next(junit).read_text()
    assert "Skipped: known failure: dies of SIGILL while pytest imports it" in text

    done, manifest = _run(tmp_path, "cpu_flags_absent")
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-2000:]
    (suite,) = manifest["suites"]
    assert suite["status"] == "crashed" and suite["cause"]["signal"] == "SIGILL", suite
