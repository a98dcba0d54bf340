"""Building a matrix's environment for real: its removals (``python.remove``) and the
one-line preflight for pins public PyPI cannot resolve (``python.sources``). Each test
asks pip itself (the package index this machine's pip is configured with)."""

import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.errors import InfraError
from harness.matrix import load_matrix
from harness.run.venvs import MARKER, Environment, check_sources, ensure_venv

ROOT = Path(__file__).resolve().parents[2]


def test_a_built_environment_loses_what_the_matrix_removes(tmp_path: Path) -> None:
    """A real build (a small pure-Python pin from the package index), then its removal."""
    python = ensure_venv(["six"], tmp_path, echo=False, remove=["six"])
    done = subprocess.run([str(python), "-c", "import six"], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 1 and "No module named 'six'" in done.stderr
    assert (python.parent.parent / MARKER).is_file()


def _matrix_with_source(tmp_path: Path, requirement: str) -> Any:
    path = tmp_path / "sourced.yaml"
    path.write_text(
        f"extends: {ROOT / 'matrices' / 'cpu.yaml'}\n"
        "python:\n"
        f"  requirements: [\"{requirement}\"]\n"
        "  sources:\n"
        f"    - {{requirement: \"{requirement}\", index: \"https://example.invalid/simple\","
        " why: \"not on PyPI\"}\n"
    )
    return load_matrix(str(path))


def test_an_unresolvable_source_stops_in_one_line(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    matrix = _matrix_with_source(tmp_path, "six==0.0.1+nosuch")
    with pytest.raises(InfraError) as raised:
        check_sources(Environment.of(matrix, emulate=False))
    line = str(raised.value)
    assert "\n" not in line and line.startswith("matrix sourced pins six==0.0.1+nosuch, which "
                                                "pip cannot resolve here (not on PyPI)")
    assert line.endswith("PIP_EXTRA_INDEX_URL=https://example.invalid/simple (or a folder of "
                         "its wheels in PIP_FIND_LINKS); nothing was built")
    check_sources(Environment.of(_matrix_with_source(tmp_path, "six"), emulate=False))  # resolves
