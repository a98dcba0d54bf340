"""The JSON Schema file is generated from schema.py, checked in, and agrees with the loader."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.commands.matrix import SCHEMA_FILE
from harness.matrix import list_matrices, load_matrix
from harness.matrix.build import plain
from harness.matrix.json_schema import json_schema
from harness.matrix.yamlsafe import read_yaml
from harness.roots import project_root

ROOT = project_root()
SHIPPED_FILES = sorted((ROOT / "matrices").glob("*.yaml"))
DATA = ROOT / "tests" / "data" / "matrices"


@functools.cache
def _cached_validator() -> Any:
    import jsonschema

    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def _validator() -> Any:
    pytest.importorskip("jsonschema")
    return _cached_validator()


def test_checked_in_schema_is_the_generated_one() -> None:
    assert SCHEMA_FILE.read_text() == json.dumps(json_schema(), indent=2) + "\n"


def test_schema_check_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "COMMANDS", ("matrix",))
    assert cli.main(["matrix", "schema", "--check"]) == 0
    assert capsys.readouterr().out == "ok matrix.schema.json\n"


@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda p: p.name)
def test_every_shipped_file_validates(path: Path) -> None:
    validator = _validator()
    raw = plain(read_yaml(path, path.name))
    assert list(validator.iter_errors(raw)) == []


@pytest.mark.parametrize("name", list_matrices())
def test_every_resolved_matrix_validates(name: str) -> None:
    validator = _validator()
    assert list(validator.iter_errors(load_matrix(name).resolved)) == []


def test_documented_example_validates() -> None:
    validator = _validator()
    raw = plain(read_yaml(DATA / "good_custom.yaml", "good_custom.yaml"))
    assert list(validator.iter_errors(raw)) == []


@pytest.mark.parametrize(
    "name",
    [
        "unknown_key.yaml",
        "wrong_type.yaml",
        "unknown_dtype.yaml",
        "unknown_provider.yaml",
        "bad_fp8.yaml",
        "path_escape.yaml",
        "bad_expires.yaml",
        "several_problems.yaml",
    ],
)
def test_bad_fixtures_fail_the_json_schema_too(name: str) -> None:
    validator = _validator()
    raw = plain(read_yaml(DATA / name, name))
    assert list(validator.iter_errors(raw)) != []


def test_schema_names_the_ops_and_providers_refengine_registers() -> None:
    """schema.py keeps its own lists (the CLI must not import torch to validate a matrix);
    this keeps them equal, in order, to refengine's op table and provider table."""
    from harness.matrix import schema
    from refengine.ops.spec import OP_NAMES
    from refengine.providers import BUILTIN

    assert schema.OPS == OP_NAMES
    assert tuple(BUILTIN) == schema.KERNEL_PROVIDERS
