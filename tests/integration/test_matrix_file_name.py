"""A matrix's ``name:`` against its file name: `matrix validate` and `run` give one answer.

In a ``matrices/`` folder a matrix is found (``--matrix foo``), listed and declared to
the report by its file name, while its runs are filed under its ``name:``; so there the
two must agree, and both commands refuse a file where they differ with the same line,
before any environment is built. A matrix passed by a path elsewhere may name itself.
The real CLI, in a project of its own (``HARNESS_ROOT``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXPECTED = (
    "harness: error: matrices/foo.yaml:2: name: 'bar' differs from the file name 'foo'"
)


def _harness(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HARNESS_ROOT": str(project)}
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "matrices").mkdir()
    (tmp_path / "matrices" / "foo.yaml").write_text(
        "extends: cpu.yaml\nname: bar\ndescription: a lane whose name is not its file's\n"
    )
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "foo.yaml").write_text(
        "extends: cpu.yaml\nname: bar\ndescription: a user's own matrix, named by itself\n"
    )
    return tmp_path


@pytest.mark.parametrize(
    "args",
    [
        ("matrix", "validate", "matrices/foo.yaml"),
        ("matrix", "validate"),
        ("run", "--matrix", "foo"),
        ("run", "--matrix", "matrices/foo.yaml"),
        ("run", "--matrix", "foo", "--dry-run"),
    ],
)
def test_validate_and_run_refuse_the_same_way(project: Path, args: tuple[str, ...]) -> None:
    reports = project / "reports"
    got = _harness(project, *args, *(["--reports", str(reports)] if args[0] == "run" else []))
    assert got.returncode == 2, got.stderr
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(EXPECTED), got.stderr
    assert not reports.exists()  # refused before a run folder or an environment


def test_a_matrix_outside_matrices_may_name_itself(project: Path) -> None:
    validated = _harness(project, "matrix", "validate", "elsewhere/foo.yaml")
    assert validated.returncode == 0, validated.stderr
    assert validated.stdout == "ok elsewhere/foo.yaml\n"
    planned = _harness(
        project, "run", "--matrix", "elsewhere/foo.yaml", "--dry-run", "--reports", "r"
    )
    assert planned.returncode == 0, planned.stderr
    assert f"{os.sep}bar{os.sep}" in planned.stdout  # its runs are filed under its name
