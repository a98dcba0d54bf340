"""``harness run`` end to end: real pytest runs of the platform suite, real run folders."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.roots import project_root

ROOT = project_root()


def harness(*args: str, reports: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args, "--reports", str(reports)],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )


def only_run_dir(reports: Path, matrix: str) -> Path:
    (run_dir,) = (reports / matrix).iterdir()
    return run_dir


def test_platform_suite_passes_and_leaves_a_complete_run_folder(tmp_path: Path) -> None:
    done = harness("run", "--suite", "platform", "--python", "current", reports=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    run_dir = only_run_dir(tmp_path, "cpu")
    for part in ("junit/platform.xml", "merged.xml", "manifest.json", "matrix.json",
                 "logs/platform.log"):
        assert (run_dir / part).is_file(), part
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "passed" and manifest["exit_code"] == 0
    assert manifest["matrix"]["name"] == "cpu" and len(manifest["matrix"]["hash"]) == 64
    assert manifest["torch"], "torch version lifted from the suite properties"
    assert manifest["threads"]["workers"] * manifest["threads"]["threads_per_worker"] <= (
        manifest["threads"]["cpus"])
    assert manifest["git"]["sha"] and manifest["started"] and manifest["ended"]
    assert manifest["suites"][0]["counts"]["passed"] > 5
    merged = ET.parse(run_dir / "merged.xml").getroot()
    assert sum(1 for _ in merged.iter("testcase")) == sum(manifest["suites"][0]["counts"].values())
    assert "platform" in done.stdout and "passed" in done.stdout  # the final table


def test_rocm_emulated_skips_hardware_checks_with_reasons(tmp_path: Path) -> None:
    done = harness("run", "--matrix", "rocm", "--emulate", "--suite", "platform",
                   "--python", "current", reports=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "needs hardware (emulated on the CPU)" in done.stdout
    junit = only_run_dir(tmp_path, "rocm") / "junit" / "platform.xml"
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert props["emulate"] == "true" and props["matrix"] == "rocm"


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path: Path) -> None:
    done = harness("run", "--matrix", "cpu", "--dry-run", "--python", "current",
                   reports=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "[platform]" in done.stdout and "-m pytest" in done.stdout
    assert not (tmp_path / "cpu").exists()


def test_unknown_suite_is_exit_2_with_one_line(tmp_path: Path) -> None:
    done = harness("run", "--suite", "platfrom", "--python", "current", reports=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "harness: error: --suite platfrom: cpu has no such suite (did you mean platform?); "
        "it has: platform, kernel_parity, fusion, e2e"
    ]


def test_bad_matrix_is_exit_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: cpu.yaml\nruntime:\n  shm_sise: 2g\n")
    done = harness("run", "--matrix", str(bad), "--dry-run", reports=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "runtime.shm_sise: unknown key (did you mean shm_size?)" in done.stderr


def test_failing_test_is_exit_1_and_infra_is_exit_3(tmp_path: Path) -> None:
    # A suite that fails a test -> 1; a -k that makes pytest error out (usage) -> 3.
    done = harness("run", "--suite", "platform", "--python", "current", "-k", "(((",
                   reports=tmp_path)
    assert done.returncode == 3, done.stdout[-2000:]
    manifest = json.loads((only_run_dir(tmp_path, "cpu") / "manifest.json").read_text())
    assert manifest["infra_error"]["kind"] == "error"


@pytest.mark.parametrize(
    ("matrix", "expected"),
    [
        ("rocm", ["--device /dev/kfd", "--device /dev/dri", "--group-add", "--ipc host",
                  "--shm-size 16g", "--security-opt seccomp=unconfined", "--cap-add SYS_PTRACE",
                  "--network none", ":ro"]),
        ("cuda", ["--gpus all", "--ipc host", "--network none"]),
        ("xpu", ["--device /dev/dri", "--group-add", "--ipc host", "--network none"]),
    ],
)
def test_docker_dry_run_prints_pasteable_docker_run(
    matrix: str, expected: list[str], tmp_path: Path
) -> None:
    done = harness("run", "--matrix", matrix, "--dry-run", "--suite", "platform",
                   reports=tmp_path)
    assert done.returncode == 0, done.stderr
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("[platform] ")]
    command = line.removeprefix("[platform] ")
    assert command.startswith("docker run --rm ")
    for part in expected:
        assert part in command, (part, command)
    assert "-m pytest" in command and "TIKTOKEN_CACHE_DIR=" in command


def test_report_flag_prints_the_path_of_a_one_run_report(tmp_path: Path) -> None:
    from report_history import matrix_text

    matrix = tmp_path / "cpu-night3.yaml"
    matrix.write_text(matrix_text("cpu", 3))
    done = harness("run", "--matrix", str(matrix), "--python", "current", "--local", "--report",
                   reports=tmp_path / "reports")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("report: ")]
    html = Path(line.removeprefix("report: "))
    run_dir = only_run_dir(tmp_path / "reports", "cpu")
    assert html == run_dir / "report" / "report.html" and html.is_file()
    md = (html.parent / "report.md").read_text()
    assert "### Failing (2; no earlier run to compare with)" in md
    assert "test_regresses_tonight" in md and "test_keeps_failing" in md
    data = json.loads((html.parent / "report.json").read_text())
    assert [lane["name"] for lane in data["lanes"]] == ["cpu"]
    assert "One night so far" in html.read_text()
    # The report folder does not make the run folder ingest differently.
    from harness.history import ingest_paths

    added = ingest_paths(tmp_path / "h.sqlite", [tmp_path / "reports"], pytest.fail).added
    assert len(added) == 1


def test_a_suite_that_ran_no_test_is_not_passed(tmp_path: Path) -> None:
    # -k that selects nothing: pytest exits 5; that is its own state and exit 1 ...
    done = harness("run", "--suite", "platform", "--python", "current", "-k",
                   "no_test_is_named_like_this", reports=tmp_path / "strict")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "no test ran in platform (--allow-empty to accept)" in done.stderr
    (row,) = [ln for ln in done.stdout.splitlines() if ln.startswith("platform ")]
    assert row.split()[1] == "no-tests", row
    manifest = json.loads((only_run_dir(tmp_path / "strict", "cpu") / "manifest.json")
                          .read_text())
    assert manifest["status"] == "no-tests" and manifest["exit_code"] == 1
    assert manifest["suites"][0]["status"] == "no-tests"
    # ... unless the run asked for it.
    allowed = harness("run", "--suite", "platform", "--python", "current", "-k",
                      "no_test_is_named_like_this", "--allow-empty", reports=tmp_path / "ok")
    assert allowed.returncode == 0, allowed.stdout[-2000:] + allowed.stderr[-2000:]


def test_a_file_skipped_whole_at_collection_is_skipped_with_its_reason(tmp_path: Path) -> None:
    """pytest exits 5 when its only file skips itself at module level (vLLM's AMX-only
    test_amx_mla.py on another CPU); JUnit holds the skip and its reason: mostly skipped,
    with the reason, not "no tests ran"."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_amx_only.py").write_text(
        "import pytest\n\npytest.skip('needs an AMX host', allow_module_level=True)\n\n"
        "def test_never():\n    pass\n")
    matrix = tmp_path / "amx.yaml"
    matrix.write_text("\n".join([
        "extends: cpu.yaml", "name: amx", "suites:",
        *(f"  {name}: {{enabled: false}}" for name in ("platform", "kernel_parity", "fusion",
                                                       "e2e")),
        f"  amx_only: {{path: {suite}, rootdir: {suite}, workers: 1, timeout_s: 300}}",
    ]) + "\n")
    done = harness("run", "--matrix", str(matrix), "--python", "current", "--local",
                   reports=tmp_path / "r")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "amx_only: mostly skipped; top skip reasons: 1x needs an AMX host" in done.stdout
    manifest = json.loads((only_run_dir(tmp_path / "r", "amx") / "manifest.json").read_text())
    (outcome,) = manifest["suites"]
    assert outcome["status"] == "mostly-skipped" and outcome["counts"]["skipped"] == 1, outcome
    # the history (what the reports read) keeps the reason too, not pytest's "collection
    # skipped"
    db = tmp_path / "history.sqlite"
    ingested = subprocess.run([sys.executable, "-m", "harness", "history", "ingest", "--db",
                               str(db), str(only_run_dir(tmp_path / "r", "amx"))],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ingested.returncode == 0, ingested.stdout + ingested.stderr
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT status, message FROM cases").fetchall()
    assert rows == [("skipped", "needs an AMX host")], rows
