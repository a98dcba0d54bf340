"""Bad input to ``harness import buildkite``: one line naming the file (and the step),
exit 2, nothing written. The steps are hand-built; the real file is read in
tests/integration/test_import_buildkite.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli

STEPS = """\
steps:
- label: Kernels
  key: kernels
  commands:
  - bash run.sh 10m "pytest -x tests/a.py"
- label: Smoke
  key: smoke
  commands:
  - bash run.sh 10m "bash smoke-test.sh tp_pp"
"""


def _import(tmp_path: Path, text: str, *steps: str) -> tuple[int, Path]:
    file = tmp_path / "cpu.yaml"
    file.write_text(text)
    out = tmp_path / "out" / "m.yaml"
    argv = ["import", "buildkite", str(file), "--out", str(out)]
    for step in steps:
        argv += ["--step", step]
    return cli.main(argv), out


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_not_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _import(tmp_path, "steps: [\n  - label: x\n  key: : :\n")
    line = _one_line(capsys)
    assert code == 2 and not out.parent.exists()
    assert f"{tmp_path / 'cpu.yaml'}:" in line and "not YAML" in line


def test_no_such_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _import(tmp_path, STEPS, "kernel")
    line = _one_line(capsys)
    assert code == 2 and not out.parent.exists()
    assert "cpu.yaml: step 'kernel': no step has this label or key (it has: kernels, smoke)" \
        in line


def test_a_step_without_pytest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _import(tmp_path, STEPS, "Kernels", "smoke")
    line = _one_line(capsys)
    assert code == 2 and not out.parent.exists()
    assert line.endswith("cpu.yaml: step smoke: commands: no pytest command")


def test_whole_file_names_what_it_leaves_out(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _import(tmp_path, STEPS)
    err = capsys.readouterr().err
    assert code == 0 and out.is_file()
    assert "step smoke: not a pytest command, not run: bash smoke-test.sh tp_pp" in err
    assert "step smoke: commands: no pytest command (not imported)" in err


def test_only_a_path_no_step_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "cpu.yaml"
    file.write_text(STEPS)
    out = tmp_path / "out" / "m.yaml"
    code = cli.main(["import", "buildkite", str(file), "--step", "kernels", "--only",
                     "tests/b.py", "--out", str(out)])
    line = _one_line(capsys)
    assert code == 2 and not out.parent.exists()
    assert line.endswith("cpu.yaml: --only tests/b.py: no chosen step runs it")


def test_per_file_groups_node_ids_by_file_and_names_a_clash_by_its_step() -> None:
    from harness.importers.buildkite import ImportedSuite, per_file

    a = ImportedSuite(name="kernels", step="kernels", label="Kernels",
                      targets=("tests/a/test_x.py", "tests/b/test_y.py::TestOne",
                               "tests/b/test_y.py::TestTwo"), options=("-x",))
    b = ImportedSuite(name="models", step="models", label="Models",
                      targets=("tests/models/test_x.py",))
    split = per_file([a, b])
    assert [(s.name, s.targets) for s in split] == [
        ("test_x", ("tests/a/test_x.py",)),
        ("test_y", ("tests/b/test_y.py::TestOne", "tests/b/test_y.py::TestTwo")),
        ("models_test_x", ("tests/models/test_x.py",)),
    ]
    assert all(s.options == ("-x",) for s in split[:2])
