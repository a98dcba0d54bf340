"""The nightly report's ops x platform view (reports/ops.py) built from real run folders:
tests/data/ops_nights holds four ``harness run --suite kernel_parity -k ...`` folders made by
tests/integration/test_report_ops.py's runs (their manifests, matrices and the suite's JUnit
and sidecars; machine paths replaced): the cpu lane on two nights (``rms_norm and bfloat16``,
then ``(rms_norm or silu_and_mul) and bfloat16``), the vllm-cpu lane (vLLM's ``_C``) and the
cuda profile emulated on the CPU (``--emulate``, with Triton's fp8_quant cases: Triton's
kernels, interpreted). Each is
ingested into a history here and the report is built; what it says is held against the
producers' own files. The integration test runs the lanes for real."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from op_runs import callers_by_op, offered_and_called

from harness import cli
from harness.reports.ops import emulated

DATA = Path(__file__).resolve().parents[1] / "data" / "ops_nights"
RUNS = {lane: sorted((DATA / folder).iterdir()) for lane, folder in
        (("cpu", "cpu"), ("vllm-cpu", "vllm-cpu"), ("cuda (emulated)", "cuda"))}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    top = tmp_path_factory.mktemp("ops-view")
    db = top / "history.sqlite"
    folders = sorted((run for runs in RUNS.values() for run in runs), key=lambda p: p.name)
    assert cli.main(["history", "ingest", "--db", str(db), *map(str, folders)]) == 0
    assert cli.main(["report", "nightly", "--db", str(db), "--out", str(top / "out")]) == 0
    data: dict[str, Any] = json.loads((top / "out" / "report.json").read_text())
    return data


def test_each_lane_s_coverage_is_what_its_latest_night_called_of_what_it_offered(
        report: dict[str, Any]) -> None:
    coverage = {c["lane"]: c for c in report["op_coverage"]}
    assert list(coverage) == ["cpu", "cuda (emulated)", "vllm-cpu"]
    for lane, runs in RUNS.items():
        offered, called = offered_and_called(runs[-1])
        assert coverage[lane]["offered"] == len(offered)
        assert coverage[lane]["exercised"] == len(offered & called) > 0
        assert coverage[lane]["share"] == pytest.approx(len(offered & called) / len(offered))
        assert coverage[lane]["missed"] == sorted(offered - called)
        shares = [len(o & c) / len(o) for o, c in map(offered_and_called, runs)]
        assert [share for _, share in coverage[lane]["trend"]] == pytest.approx(shares)
    assert coverage["cuda (emulated)"]["emulated"] is True
    assert coverage["cpu"]["emulated"] is False and coverage["vllm-cpu"]["emulated"] is False
    first, second = (share for _, share in coverage["cpu"]["trend"])
    assert second > first  # the second night ran silu_and_mul too


def test_each_op_s_cells_are_the_tests_of_each_lane_that_called_it(
        report: dict[str, Any]) -> None:
    rows = {row["name"]: row for row in report["ops"]}
    offered = {lane: offered_and_called(runs[-1])[0] for lane, runs in RUNS.items()}
    calls = {lane: callers_by_op(runs[-1]) for lane, runs in RUNS.items()}
    everything = set().union(*offered.values(), *(set(c) for c in calls.values()))
    assert set(rows) == everything
    for name, row in rows.items():
        for lane in RUNS:
            tests = calls[lane].get(name, set())
            assert row["tests"][lane] == len(tests), (name, lane)
            assert row["offered"][lane] == (name in offered[lane]), (name, lane)
            assert len(row["examples"].get(lane, [])) == min(3, len(tests))
        ran_on = [lane for lane in RUNS if calls[lane].get(name)]
        assert row["only_emulated"] == (ran_on == ["cuda (emulated)"]), name
    # where an op is defined: the engine's own source, as its run recorded it
    assert rows["_C::rms_norm"]["where"].startswith("csrc/cpu/")
    assert rows["triton/fp8_quant"]["only_emulated"] is True  # only the emulated cuda ran it
    assert rows["triton/rms_norm"]["only_emulated"] is False  # the cpu lane ran it too
    assert rows["_C::rms_norm"]["only_emulated"] is False
    never = set(report["ops_not_exercised"])
    assert never == {name for name, row in rows.items()
                     if not any(row["tests"].values())}
    assert "_C::cpu_fused_moe" in never and "_C::rms_norm" not in never


def test_a_lane_without_matrix_facts_is_emulated_by_its_name_alone() -> None:
    assert emulated("cuda (emulated)", None) is True
    assert emulated("cpu", None) is False


def test_a_run_from_before_the_surface_shows_its_calls_without_a_share(
        tmp_path: Path) -> None:
    """A run written before runs recorded the engine's surface (its fingerprint has no
    ``engine_ops``: the manifest of a run of an earlier harness): its lane has calls, no
    offered ops, and no coverage figure, rather than no row."""
    (old,) = RUNS["vllm-cpu"]
    copy = tmp_path / "vllm-cpu" / old.name
    shutil.copytree(old, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["device_fingerprint"]["engine_ops"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    db = tmp_path / "history.sqlite"
    assert cli.main(["history", "ingest", "--db", str(db), str(copy)]) == 0
    assert cli.main(["report", "nightly", "--db", str(db), "--out", str(tmp_path / "out")]) == 0
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    (row,) = data["op_coverage"]
    _, called = offered_and_called(old)
    assert (row["lane"], row["offered"], row["share"], row["trend"]) == ("vllm-cpu", 0, None, [])
    assert row["exercised"] == 0 and row["missed"] == []
    assert {op["name"] for op in data["ops"] if op["tests"]["vllm-cpu"]} == called
