"""ExpectationStore.write merges with what other xdist workers wrote meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.matrix.lane_data import LaneFiles
from harness.plugin.expectations import ExpectationStore, load_file


def _counts(n: int) -> dict[str, object]:
    return {"passes": {"add_rms_norm": n}, "unfused": {"rms_norm": 0}, "kernels": n}


def test_two_workers_updating_one_file_keep_both_cases(tmp_path: Path) -> None:
    path = tmp_path / "expectations" / "rocm-emulated.yaml"
    path.parent.mkdir()
    # Both workers load the (missing) file before either writes, as under xdist.
    first = ExpectationStore(LaneFiles(read=path, own=path), "rocm", True, "2.13.0")
    second = ExpectationStore(LaneFiles(read=path, own=path), "rocm", True, "2.13.0")
    first.check("decoder_layer_bfloat16", _counts(2))
    second.check("moe_block", _counts(1))
    assert "+  decoder_layer_bfloat16:" in first.write()
    diff = second.write()
    assert "+  moe_block:" in diff and "+  decoder_layer_bfloat16:" not in diff
    cases = load_file(path)
    assert sorted(cases) == ["decoder_layer_bfloat16", "moe_block"]
    assert cases["decoder_layer_bfloat16"]["kernels"] == 2
    assert [p.name for p in path.parent.iterdir()] == ["rocm-emulated.yaml"]  # no lock file


def test_a_moved_count_names_pass_counts_and_torch(tmp_path: Path) -> None:
    path = tmp_path / "cpu.yaml"
    writer = ExpectationStore(LaneFiles(read=path, own=path), "cpu", True, "2.13.0")
    writer.check("case", _counts(2))
    writer.write()
    checker = ExpectationStore(LaneFiles(read=path, own=path), "cpu", False, "2.13.0")
    with pytest.raises(AssertionError) as error:
        checker.check("case", _counts(0))
    text = str(error.value)
    assert "case: pass add_rms_norm: expected 2, found 0" in text
    assert "case: inductor kernels: expected 2, found 0" in text and "torch 2.13.0" in text
