"""Project-root discovery and the shipped root (harness.roots), on real folders."""

import subprocess
import sys
from pathlib import Path

import pytest

from harness.matrix import list_matrices, load_matrix
from harness.roots import find_project, import_path, locate, project_root, shipped_root

ROOT = shipped_root()


Done = subprocess.CompletedProcess[str]


def _harness(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Done:
    import os

    base = {k: v for k, v in os.environ.items() if k != "HARNESS_ROOT"}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, text=True,
                          capture_output=True, env=base | (env or {}), check=False)


def _project(tmp_path: Path, marker: str) -> Path:
    proj = tmp_path / "proj"
    (proj / "matrices").mkdir(parents=True)
    (proj / "deep" / "er").mkdir(parents=True)
    if marker == "pyproject":
        (proj / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.harness]\n')
    else:
        (proj / "harness.toml").write_text("# a harness project\n")
    (proj / "matrices" / "mine.yaml").write_text(
        "extends: cpu.yaml\ndescription: mine\nhardware: My box\n"
    )
    return proj


@pytest.mark.parametrize("marker", ["pyproject", "harness.toml"])
def test_project_found_from_a_subfolder(tmp_path: Path, marker: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    proj = _project(tmp_path, marker)
    monkeypatch.delenv("HARNESS_ROOT", raising=False)
    monkeypatch.chdir(proj / "deep" / "er")
    assert project_root() == proj.resolve()
    assert "mine" in list_matrices() and "cpu" in list_matrices()
    mine = load_matrix("mine")
    assert mine.hardware == "My box" and mine.family == "cpu"  # extends the shipped cpu
    assert mine.file == "matrices/mine.yaml"


def test_pyproject_without_the_table_is_not_a_project(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.harnessy]\n')
    assert find_project(tmp_path) is None


def test_root_flag_and_env(tmp_path: Path) -> None:
    proj = _project(tmp_path, "harness.toml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    by_flag = _harness("--root", str(proj), "matrix", "list", cwd=elsewhere)
    assert by_flag.returncode == 0 and "\nmine " in "\n" + by_flag.stdout
    by_env = _harness("matrix", "list", cwd=elsewhere, env={"HARNESS_ROOT": str(proj)})
    assert by_env.stdout == by_flag.stdout
    bad = _harness("--root", str(tmp_path / "nope"), "matrix", "list", cwd=elsewhere)
    assert bad.returncode == 2 and bad.stderr.strip().endswith("no such folder")


def test_a_project_matrix_hides_a_shipped_one_of_the_same_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = _project(tmp_path, "harness.toml")
    (proj / "matrices" / "cpu.yaml").write_text(
        (ROOT / "matrices" / "cpu.yaml").read_text().replace("hardware: Host CPU",
                                                             "hardware: Our CPU")
    )
    monkeypatch.setenv("HARNESS_ROOT", str(proj))
    assert load_matrix("cpu").hardware == "Our CPU"


def test_locate_prefers_the_project(tmp_path: Path) -> None:
    assert locate("suites/platform", tmp_path) == ROOT / "suites" / "platform"
    (tmp_path / "suites" / "platform").mkdir(parents=True)
    assert locate("suites/platform", tmp_path) == tmp_path / "suites" / "platform"


def test_history_defaults_under_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.history.schema import default_db_path

    proj = _project(tmp_path, "pyproject")
    monkeypatch.delenv("HARNESS_HISTORY", raising=False)
    monkeypatch.delenv("HARNESS_ROOT", raising=False)
    monkeypatch.chdir(proj / "deep")
    assert default_db_path() == proj.resolve() / "reports" / "history.sqlite"


def test_import_path_in_a_checkout_is_the_checkout(tmp_path: Path) -> None:
    assert import_path(tmp_path) == ROOT
    assert (ROOT / "harness" / "__init__.py").is_file()


@pytest.mark.parametrize("outer", [None, "outer"])
def test_root_flag_in_process_leaves_the_environment_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    outer: str | None,
) -> None:
    """``cli.main(["--root", P, ...])`` in a test or a script: P is the root for that call
    (its children see it), and the caller's HARNESS_ROOT is its own again afterwards."""
    import os

    from harness import cli

    proj = _project(tmp_path, "harness.toml")
    if outer is None:
        monkeypatch.delenv("HARNESS_ROOT", raising=False)
    else:
        monkeypatch.setenv("HARNESS_ROOT", str(ROOT))
    assert cli.main(["--root", str(proj), "matrix", "list"]) == 0
    assert "\nmine " in "\n" + capsys.readouterr().out
    assert os.environ.get("HARNESS_ROOT") == (None if outer is None else str(ROOT))
