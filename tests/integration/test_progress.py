"""Progress lines and their time estimates, from folders ``harness run`` wrote."""

from pathlib import Path

import pytest
from runs import Runs, harness

from harness.results.layout import Lane
from harness.run.progress import Progress, folder_estimates, history_estimates


def test_estimates_from_the_last_run_folder(real_runs: Runs) -> None:
    plain = folder_estimates(real_runs.passing.parent, emulate=False)
    assert set(plain) == {"record"} and plain["record"] > 0
    # an emulated run is its own lane: its folders are under its matrix's name
    assert folder_estimates(real_runs.passing.parent, emulate=True) == {}
    assert folder_estimates(real_runs.passing.parent / "nope", emulate=False) == {}


def test_estimates_from_the_history(real_runs: Runs, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    done = harness("history", "ingest", str(real_runs.passing), str(real_runs.failing),
                   "--db", str(db))
    assert done.returncode == 0, done.stderr
    estimates = history_estimates(db, Lane(matrix="record"))
    assert set(estimates) == {"record"} and estimates["record"] > 0
    assert history_estimates(db, Lane(matrix="other-lane")) == {}
    assert history_estimates(tmp_path / "missing.sqlite", Lane(matrix="record")) == {}


def test_progress_lines(capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress(["platform", "kernel_parity"], {"platform": 30.0, "kernel_parity": 150.0})
    progress.start(0, "platform")
    progress.end(0, "platform", "passed", {"passed": 13, "skipped": 4})
    progress.start(1, "kernel_parity")
    progress.end(1, "kernel_parity", "failed", {"passed": 100, "failed": 2})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("harness: suite 1 of 2: platform; took 30s last time; "
                        "about 3m00s left in all")
    text = "\n".join(lines)
    assert "harness: suite 1 of 2 platform: passed; so far 13 passed, 0 failed, 4 skipped;" in text
    assert "about 2m30s left" in text
    assert "suite 2 of 2 kernel_parity: failed;" in text
    assert "so far 113 passed, 2 failed, 4 skipped" in text  # counts add up over suites
    assert all(len(line) <= 80 for line in lines), [len(x) for x in lines]


def test_no_estimate_without_history(capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress(["platform"], {})
    progress.start(0, "platform")
    assert capsys.readouterr().out.strip() == "harness: suite 1 of 1: platform"
