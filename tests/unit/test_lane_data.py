"""Every shipped lane has the per-lane files its suites read (golden ids, fusion
expectations), on its own hardware and emulated, or a known failure of the lane says why
not: no shipped lane is red for want of a file (vllm-zen was, on Zen 4, until its golden
ids were recorded there). Asked through ``harness matrix lanes`` as a user asks it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli
from harness.matrix import list_matrices, load_matrix
from harness.matrix.lane_data import lane_file, needs

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list_matrices())
def test_each_shipped_lane_has_its_files(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["matrix", "lanes", name])
    out = capsys.readouterr().out
    assert code == 0, out
    matrix = load_matrix(name)
    for emulate in (False, True):
        for need in needs(matrix, emulate=emulate, root=ROOT):
            assert need.covered_by, need.line(name, emulate)
            assert matrix.device != "cpu" and not emulate, need  # only a GPU's own hardware


def test_a_gpu_lane_without_its_files_says_why_on_its_hardware_only() -> None:
    cuda = load_matrix("cuda")
    native = needs(cuda, emulate=False, root=ROOT)
    assert {(n.suite, n.path.name) for n in native} == {("e2e", "cuda.json"),
                                                      ("fusion", "cuda.yaml")}
    assert all("recorded on the lane's hardware" in n.covered_by for n in native)
    assert needs(cuda, emulate=True, root=ROOT) == []


def test_a_cpu_matrix_off_its_hardware_reads_its_own_file() -> None:
    folder = ROOT / "suites" / "e2e"
    assert lane_file(folder, "golden", "vllm-zen", "cpu", True).name == "vllm-zen.json"
    assert lane_file(folder, "golden", "cuda", "cuda", True).name == "cuda-emulated.json"
    assert lane_file(folder, "expectations", "rocm", "cuda", False).name == "rocm.yaml"


def test_a_lane_missing_a_file_is_named_with_the_command_that_records_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "engine"
    (project / "matrices").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.harness]\n")
    checks = project / "checks"
    (checks / "golden").mkdir(parents=True)
    (checks / "golden" / "other.json").write_text("{}\n")
    (checks / "test_ids.py").write_text("def test_ids():\n    pass\n")
    (project / "matrices" / "mine.yaml").write_text(
        "extends: cpu.yaml\ndescription: mine\nsuites:\n  mine: {path: checks, workers: 1, "
        "timeout_s: 60, markers: '', k: '', tier: full, enabled: true}\n")
    code = cli.main(["--root", str(project), "matrix", "lanes", "mine"])
    out = capsys.readouterr().out
    assert code == 1
    assert (f"mine: suite mine: {checks / 'golden' / 'mine.json'} is missing: record it with "
            "`harness run --matrix mine --suite mine --update-expectations`") in out
