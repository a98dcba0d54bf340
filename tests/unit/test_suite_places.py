"""Suites anywhere: where a suite's path, rootdir and cwd point; its pytest arguments;
the lines that say when a matrix caps a command-line value; ``-- ARGS``."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import ConfigError
from harness.matrix import load_matrix
from harness.roots import project_root
from harness.run.plan import PlanOptions, override_notes, plan_run, suite_place

ROOT = project_root()


def user_matrix(folder: Path, suites: str, extra: str = "") -> Path:
    path = folder / "user" / "mine.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"extends: cpu\nsuites:\n{suites}{extra}")
    return path


def test_a_user_matrix_anywhere_extends_a_shipped_one_by_name(tmp_path: Path) -> None:
    matrix = load_matrix(user_matrix(tmp_path, "  own: {path: tests}\n"))
    assert matrix.extends == "cpu" and matrix.family == "cpu"
    assert set(matrix.suites) == {*load_matrix("cpu").suites, "own"}


def test_relative_paths_read_against_the_matrix_file_else_the_repository(
    tmp_path: Path,
) -> None:
    (tmp_path / "engine" / "tests").mkdir(parents=True)
    matrix = load_matrix(
        user_matrix(
            tmp_path,
            "  own: {path: ../engine/tests, rootdir: ../engine}\n"
            "  shipped_style: {path: suites/platform}\n",
        )
    )
    assert matrix.suites["own"].path == str(tmp_path / "engine" / "tests")
    assert matrix.suites["own"].rootdir == str(tmp_path / "engine")
    assert matrix.suites["shipped_style"].path == "suites/platform"  # not beside the file
    # The shipped matrices keep repository-relative paths: the same hash on every machine.
    assert load_matrix("cpu").suites["platform"].path == "suites/platform"


def test_variables_and_home_expand_and_an_unset_one_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGINE_SRC", str(tmp_path / "src"))
    matrix = load_matrix(user_matrix(tmp_path, "  own: {path: '${ENGINE_SRC}/tests'}\n"))
    assert matrix.suites["own"].path == str(tmp_path / "src" / "tests")
    monkeypatch.delenv("ENGINE_SRC")
    path = user_matrix(tmp_path, "  own: {path: '${ENGINE_SRC}/tests'}\n")
    with pytest.raises(ConfigError) as caught:
        load_matrix(path)
    assert str(caught.value) == (
        f"{path}:3: suites.own.path: '${{ENGINE_SRC}}/tests' names an environment variable "
        "that is not set"
    )


def test_a_suite_outside_runs_from_its_own_rootdir_with_its_arguments(tmp_path: Path) -> None:
    tree = tmp_path / "engine"
    tree.mkdir()
    matrix = load_matrix(
        user_matrix(
            tmp_path,
            "  own: {path: ../engine, workers: 1, pytest_args: [-p, no:randomly]}\n",
        )
    )
    place = suite_place(matrix.suites["own"], ROOT)
    assert (place.target, place.rootdir, place.cwd, place.inside) == (tree, tree, tree, False)
    shipped = suite_place(matrix.suites["platform"], ROOT)
    assert (shipped.rootdir, shipped.cwd, shipped.inside) == (ROOT, None, True)
    options = PlanOptions(
        python="py",
        platform_spec="m.json",
        suites=["own"],
        workers=2,
        workers_asked=2,
        extra_pytest_args=("-x",),
        tests={"own": ("pkg/test_a.py::test_b",)},
    )
    (inv,) = plan_run(matrix, tmp_path / "run", ROOT, options)
    assert inv.argv[3] == str(tree / "pkg/test_a.py::test_b")  # node ids: rootdir-relative
    assert f"--rootdir={tree}" in inv.argv and inv.cwd == tree
    assert inv.argv[-3:] == ("-p", "no:randomly", "-x")  # the suite's, then the command's
    assert "-n" not in inv.argv
    assert override_notes(matrix, options) == [
        "--workers 2 capped to 1 for suite own (its matrix entry says workers: 1)"
    ]


def test_requirements_append_for_a_suites_test_dependencies(tmp_path: Path) -> None:
    path = user_matrix(
        tmp_path, "  own: {path: tests}\n", "python:\n  requirements+: [hypothesis]\n"
    )
    cpu = load_matrix("cpu").python.requirements
    assert load_matrix(path).python.requirements == (*cpu, "hypothesis")


def test_arguments_after_a_double_dash_go_to_pytest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["run", "--suite", "platform", "--dry-run", "--python", "current",
         "--reports", str(tmp_path), "--", "-x", "--tb=line"]
    )
    out = capsys.readouterr().out
    assert code == 0 and out.splitlines()[-1].endswith(" -x --tb=line")
    with pytest.raises(SystemExit):
        main(["history", "ls", "--", "-x"])
    assert "only 'harness run' takes them" in capsys.readouterr().err


def test_the_documented_user_matrix_loads(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "byo-suite.md").read_text()
    example = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "test" / "unittests").mkdir(parents=True)
    path = tmp_path / "ci" / "engine-cpu.yaml"
    path.parent.mkdir()
    path.write_text(example)
    matrix = load_matrix(path)
    suite = matrix.suites["engine"]
    assert (suite.path, suite.rootdir) == (str(tmp_path / "test/unittests"), str(tmp_path))
    assert suite.pytest_args == ("-p", "no:randomly") and suite.max_skip_ratio == 0.5
    assert matrix.python.requirements[-2:] == ("hypothesis", "engine==2.14.0")


def test_in_docker_a_suite_outside_is_mounted_at_its_own_path_and_runs_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "engine"
    tree.mkdir()
    path = user_matrix(tmp_path, "  own: {path: ../engine}\n")
    code = main(["run", "--matrix", str(path), "--suite", "own", "--docker", "--dry-run"])
    line = capsys.readouterr().out.splitlines()[-1]
    assert code == 0 and line.startswith("[own] docker run ")
    assert f"-v {tree}:{tree} " in line and f"--workdir {tree} " in line
    assert f"--workdir {ROOT}" not in line
