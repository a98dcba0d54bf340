"""One corrupted cache file: ``harness cache verify`` names it (exit 3), and ``harness run``
of the e2e suite stops with exit 3 before any suite runs, telling the user to prime."""

from __future__ import annotations

import json
from pathlib import Path

from cache_matrix import harness, temp_cpu_matrix


def test_corrupt_cache_file_is_reported_before_the_run(tmp_path: Path) -> None:
    matrix = temp_cpu_matrix(tmp_path)
    primed = harness("cache", "prime", "--matrix", str(matrix))
    assert primed.returncode == 0, primed.stdout + primed.stderr
    ok = harness("cache", "verify", "--matrix", str(matrix))
    assert ok.returncode == 0, ok.stdout + ok.stderr

    (victim,) = (tmp_path / "cache" / "tiktoken").iterdir()
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte, same size
    victim.write_bytes(bytes(data))

    verify = harness("cache", "verify", "--matrix", str(matrix))
    assert verify.returncode == 3, verify.stdout + verify.stderr
    assert f"corrupt: {victim}" in verify.stderr
    assert "Traceback" not in verify.stderr

    reports = tmp_path / "reports"
    run = harness(
        "run",
        "--matrix",
        str(matrix),
        "--suite",
        "e2e",
        "--python",
        "current",
        "--reports",
        str(reports),
    )
    assert run.returncode == 3, run.stdout[-3000:] + run.stderr[-2000:]
    assert f"corrupt: {victim}" in run.stderr
    assert "harness cache prime" in run.stderr
    assert "Traceback" not in run.stderr
    # No suite ran: no JUnit, no log, and the manifest records an infra error.
    (run_dir,) = (reports / "cpu").iterdir()
    assert not list(run_dir.glob("junit/*.xml")) and not list(run_dir.glob("logs/*.log"))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["exit_code"] == 3 and manifest["infra_error"] is not None
    assert manifest["suites"] == []
