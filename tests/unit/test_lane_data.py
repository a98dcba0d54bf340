"""Every shipped lane has the per-lane files its suites read (golden ids, fusion
expectations), on its own hardware and emulated, or a known failure of the lane says why
not: no shipped lane is red for want of a file (vllm-zen was, on Zen 4, until its golden
ids were recorded there). Asked through ``harness matrix lanes`` as a user asks it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import cli
from harness.matrix import list_matrices, load_matrix
from harness.matrix.lane_data import lane_file, lane_files, needs, recorded_in

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


def _project(tmp_path: Path, **matrices: str) -> Path:
    project = tmp_path / "engine"
    (project / "matrices").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.harness]\n")
    for name, text in matrices.items():
        (project / "matrices" / f"{name}.yaml").write_text(text)
    return project


SUITES_ONLY = "extends: {parent}.yaml\ndescription: d\nsuites:\n  e2e: {{k: native}}\n"


def test_a_matrix_that_changes_no_lane_fact_reads_its_parents_files(tmp_path: Path) -> None:
    """An imported step (suites, known failures, runtime.preload, ci) over vllm-cpu, and one
    over it again, read vllm-cpu's; a file that sets the engine's pins, the CPU or an ISA
    cap (runtime.env) reads its own alone; so does every shipped lane (their hashes as
    they were: no lane_data key)."""
    project = _project(
        tmp_path,
        kernels=SUITES_ONLY.format(parent="vllm-cpu")
        + "runtime: {preload: [torch]}\nci: {shards: 2}\nknown_failures+: []\n",
        upstream=SUITES_ONLY.format(parent="kernels"),
        pinned=SUITES_ONLY.format(parent="vllm-cpu") + "python: {requirements: [torch]}\n",
        capped=SUITES_ONLY.format(parent="vllm-cpu") + "runtime:\n  env: {A: '1'}\n",
        older=SUITES_ONLY.format(parent="vllm-cpu") + "cpu: {emulated: x86-64-v3}\n",
        mine=SUITES_ONLY.format(parent="cpu"))
    lanes = {name: load_matrix(name, root=project).lane_data
             for name in ("kernels", "upstream", "pinned", "capped", "older", "mine")}
    assert lanes == {"kernels": ("kernels", "vllm-cpu"),
                     "upstream": ("upstream", "kernels", "vllm-cpu"),
                     "pinned": ("pinned",), "capped": ("capped",), "older": ("older",),
                     "mine": ("mine", "cpu")}
    for name in list_matrices():
        matrix = load_matrix(name)
        assert matrix.lane_data == (name,) and "lane_data" not in matrix.resolved, name


def test_a_matrix_json_from_before_lane_data_reads_its_own_files() -> None:
    from harness.matrix.loader import matrix_from_json

    data = {k: v for k, v in load_matrix("vllm-cpu").resolved.items()}
    assert matrix_from_json(json.dumps(data), "matrix.json").lane_data == ("vllm-cpu",)
    data |= {"name": "kernels", "lane_data": ["kernels", "vllm-cpu"]}
    assert matrix_from_json(json.dumps(data), "matrix.json").lane_data == ("kernels",
                                                                          "vllm-cpu")


def test_the_own_file_wins_and_a_project_records_in_the_project(tmp_path: Path) -> None:
    """A shipped suite run in a user's project: it reads the project's own file first, the
    parent's shipped one else; it records into the project's copy of the suite folder,
    never into the harness that ships it."""
    project = _project(tmp_path, mine=SUITES_ONLY.format(parent="vllm-cpu"))
    matrix = load_matrix("mine", root=project)
    folder = ROOT / "suites" / "e2e"
    files = lane_files(folder, "golden", matrix, False, project)
    assert files.read == folder / "golden" / "vllm-cpu.json"
    assert files.own == project / "lane-data" / "suites" / "e2e" / "golden" / "mine.json"
    assert needs(matrix, emulate=False, root=project) == []
    files.own.parent.mkdir(parents=True)
    files.own.write_text("{}\n")
    assert lane_files(folder, "golden", matrix, False, project).read == files.own
    files.own.write_text("")  # an empty file is none
    assert lane_files(folder, "golden", matrix, False, project).read == files.read
    # in the checkout itself (the project is the harness): its own folder
    assert recorded_in(folder, ROOT) == folder
    assert recorded_in(tmp_path / "elsewhere", project) == tmp_path / "elsewhere"


def _covered(tmp_path: Path, entries: str) -> list[str]:
    """What ``needs`` says covers the missing golden ids of a project's suite ``checks``,
    given these known failures (YAML list items)."""
    project = tmp_path / "engine"
    (project / "matrices").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.harness]\n")
    for folder in ("checks", "other"):
        (project / folder / "golden").mkdir(parents=True)
        (project / folder / "test_ids.py").write_text("def test_ids():\n    pass\n")
    (project / "matrices" / "mine.yaml").write_text(
        "extends: cpu.yaml\ndescription: mine\nsuites:\n  mine: {path: checks, workers: 1}\n"
        "known_failures+:\n" + entries)
    return [n.covered_by for n in needs(load_matrix("mine", root=project), emulate=False,
                                        root=project) if n.suite == "mine"]


ENTRY = ("  - {{id: '{file}::test_ids', reason: r, owner: o, expires: 2099-01-01, "
         "action: xfail, expect: {expect}}}\n")


def test_only_a_known_failure_of_the_suites_folder_expecting_the_missing_file_covers_it(
        tmp_path: Path) -> None:
    missing = "{raises: LaneDataMissing}"
    assert _covered(tmp_path / "a", ENTRY.format(file="checks/test_ids.py", expect=missing)
                    ) != [""]
    # another suite's folder: not this suite's file
    assert _covered(tmp_path / "b", ENTRY.format(file="other/test_ids.py", expect=missing)
                    ) == [""]
    # this folder, but expecting another failure
    assert _covered(tmp_path / "c", ENTRY.format(file="checks/test_ids.py",
                                                 expect="{raises: AssertionError}")) == [""]


def test_a_file_of_one_byte_is_there_and_an_empty_one_is_not(tmp_path: Path) -> None:
    """The lane's own file wins over its parent's from its first byte; an empty one is
    none (a recording cut short), so the parent's is read."""
    project = _project(tmp_path, mine=SUITES_ONLY.format(parent="cpu"))
    matrix = load_matrix("mine", root=project)
    folder = tmp_path / "suite"
    (folder / "golden").mkdir(parents=True)
    (folder / "golden" / "cpu.json").write_text("{}\n")
    own = folder / "golden" / "mine.json"
    own.write_text("{")
    assert lane_files(folder, "golden", matrix, False, project).read == own
    own.write_text("")
    assert lane_files(folder, "golden", matrix, False, project).read == (
        folder / "golden" / "cpu.json")
