"""`harness matrix list | show | validate` in-process: exact output and exit codes."""

from __future__ import annotations

import json

import pytest
import yaml

from harness import cli
from harness.matrix import list_matrices, load_matrix
from harness.roots import project_root


@pytest.fixture(autouse=True)
def _only_matrix_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "COMMANDS", ("matrix",))
    monkeypatch.delenv("HARNESS_ROOT", raising=False)


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["matrix", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list_matrices()
    rocm = next(line for line in lines if line.startswith("rocm "))
    assert rocm.split()[1] == "rocm"
    assert "AMD Instinct MI300X" in rocm
    assert "base" not in {line.split()[0] for line in lines}


def test_validate_everything_shipped(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["matrix", "validate"]) == 0
    out = capsys.readouterr().out
    names = sorted(p.name for p in (project_root() / "matrices").glob("*.yaml"))
    assert out == "".join(f"ok matrices/{name}\n" for name in names)


def test_show_file_and_resolved(capsys: pytest.CaptureFixture[str]) -> None:
    matrix = load_matrix("rocm-mi355")
    assert cli.main(["matrix", "show", "rocm-mi355"]) == 0
    out = capsys.readouterr().out
    header, _, body = out.partition("\n")
    assert header == f"# matrices/rocm-mi355.yaml  hash {matrix.hash}"
    assert body == (project_root() / "matrices" / "rocm-mi355.yaml").read_text()

    assert cli.main(["matrix", "show", "rocm-mi355", "--resolved"]) == 0
    header, _, body = capsys.readouterr().out.partition("\n")
    assert header.endswith(matrix.hash)
    shown = yaml.safe_load(body)
    assert json.dumps(shown, sort_keys=True) == json.dumps(matrix.resolved, sort_keys=True)
    assert shown["runtime"]["devices"] == ["/dev/kfd", "/dev/dri"]


def test_matrix_needs_an_action(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["matrix"])
    assert info.value.code == 2
