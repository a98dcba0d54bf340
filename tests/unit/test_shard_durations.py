"""harness.shard_durations: the durations file, id alignment, JUnit as a source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.shard_durations import (
    DurationSet,
    align,
    dump,
    durations_for,
    from_junit,
    junit_files,
    load,
    lookup_keys,
)


def test_round_trip(tmp_path: Path) -> None:
    original = DurationSet(matrix="rocm", durations={"a.py::t": 1.5},
                           siblings={"cuda": {"a.py::t": 0.5}})
    dump(original, tmp_path / "d" / "durations.json")
    assert load(tmp_path / "d" / "durations.json") == original


def test_flat_mapping_is_this_matrix(tmp_path: Path) -> None:
    path = tmp_path / ".test_durations"
    path.write_text(json.dumps({"a.py::t": 2, "a.py::u": 0.25}))
    loaded = load(path)
    assert loaded.durations == {"a.py::t": 2.0, "a.py::u": 0.25}
    assert loaded.siblings == {}


@pytest.mark.parametrize(("text", "message"), [
    ('{"a.py::t": 1,\n "b": }', r"d\.json:2: not valid JSON"),
    ('{"schema": 7}', r"d\.json: schema: unsupported schema 7"),
    ('{"schema": 1, "durations": {"x": true}}', r"d\.json: durations\.x: expected seconds"),
    ('{"schema": 1, "siblings": {"cuda": [1]}}', r"siblings\.cuda: expected a mapping"),
    ('[1, 2]', r"d\.json: durations: expected a mapping"),
])
def test_bad_files_name_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "d.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load(path)


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.json: cannot read durations file"):
        load(tmp_path / "nope.json")


def test_lookup_keys_drop_device_for_siblings() -> None:
    raw, normalised, key = lookup_keys("suites/k/test_a.py::test_op[cuda:0-bfloat16]")
    assert raw == "suites/k/test_a.py::test_op[cuda:0-bfloat16]"
    assert normalised == "suites/k/test_a.py::test_op[cuda-bfloat16]"
    assert key == "suites/k/test_a.py::test_op[bfloat16]"


def test_align_matches_own_by_node_id_and_siblings_by_key() -> None:
    source = DurationSet(
        durations={"suites/k/test_a.py::test_op[cpu-bfloat16]": 4.0},
        siblings={"cuda": {"suites/k/test_a.py::test_op[bfloat16]": 0.5,
                           "suites/k/test_a.py::test_other": 0.2}},
    )
    ids = ["suites/k/test_a.py::test_op[cpu-bfloat16]", "suites/k/test_a.py::test_new"]
    own, siblings = align(ids, source)
    assert own == {"suites/k/test_a.py::test_op[cpu-bfloat16]": 4.0}
    assert siblings == {"cuda": {"suites/k/test_a.py::test_op[cpu-bfloat16]": 0.5}}


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="kernel_parity" tests="3">
<testcase classname="suites.k.test_a" name="test_op[{dev}-bfloat16]" time="{t}"/>
<testcase classname="suites.k.test_a" name="test_skip" time="0.001">
  <skipped message="needs hardware"/></testcase>
<testcase classname="suites.k.test_a.TestB" name="test_c" time="1.0"/>
</testsuite></testsuites>
"""


def _run(reports: Path, matrix: str, run: str, dev: str, seconds: float) -> None:
    folder = reports / matrix / run / "junit"
    folder.mkdir(parents=True)
    (folder / "kernel_parity.xml").write_text(JUNIT.format(dev=dev, t=seconds))
    (folder / "kernel_parity.partial.jsonl").write_text("{}\n")


def test_from_junit_takes_medians_per_matrix(tmp_path: Path) -> None:
    for run, seconds in (("r1", 2.0), ("r2", 3.0), ("r3", 10.0)):
        _run(tmp_path, "cpu", run, "cpu", seconds)
    _run(tmp_path, "cuda", "r1", "cuda:0", 0.4)
    files = junit_files(tmp_path)
    assert sorted(files) == ["cpu", "cuda"] and len(files["cpu"]) == 3
    found = from_junit(files, "cpu")
    assert found.matrix == "cpu"
    assert found.durations == {
        "suites/k/test_a.py::test_op[cpu-bfloat16]": 3.0,
        "suites/k/test_a.py::test_skip": 0.001,  # costs nothing here, and is known to
        "suites/k/test_a.py::TestB::test_c": 1.0,
    }
    # A skip on a sibling says nothing of the cost; device-free keys join platforms.
    assert found.siblings == {"cuda": {"suites/k/test_a.py::test_op[bfloat16]": 0.4,
                                       "suites/k/test_a.py::TestB::test_c": 1.0}}


def _manifest_run(reports: Path, matrix: str, run: str, started: str, dev: str,
                  seconds: float, *, emulate: bool = False) -> None:
    _run(reports, matrix, run, dev, seconds)
    (reports / matrix / run / "manifest.json").write_text(json.dumps({
        "schema": 1, "run_id": f"{matrix}-{run}", "matrix": {"name": matrix},
        "emulate": emulate, "started": started, "suites": [],
    }))


def test_durations_for_reads_the_last_runs_of_each_lane(tmp_path: Path) -> None:
    from harness.history import ingest_paths

    reports = tmp_path / "reports"
    # Four cpu runs: the oldest (100 s) falls outside last_runs=3.
    for k, seconds in enumerate((100.0, 2.0, 3.0, 4.0)):
        _manifest_run(reports, "cpu", f"r{k}", f"2026-01-0{k + 1}T00:00:00Z", "cpu", seconds)
    _manifest_run(reports, "rocm", "e1", "2026-01-05T00:00:00Z", "cpu", 9.0, emulate=True)
    db = tmp_path / "history.sqlite"
    ingest_paths(db, [reports], lambda line: None)

    found = durations_for("cpu", db, last_runs=3)
    assert found.durations["suites/k/test_a.py::test_op[cpu-bfloat16]"] == 3.0
    assert found.durations["suites/k/test_a.py::test_skip"] == 0.001
    assert found.siblings == {"rocm (emulated)": {
        "suites/k/test_a.py::test_op[bfloat16]": 9.0,
        "suites/k/test_a.py::TestB::test_c": 1.0,
    }}


def test_durations_for_without_a_database_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"history\.sqlite: no history database"):
        durations_for("cpu", tmp_path / "history.sqlite")


def test_ci_durations_command_writes_the_file_shards_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main
    from harness.history import ingest_paths

    reports = tmp_path / "reports"
    _manifest_run(reports, "cpu", "r1", "2026-01-01T00:00:00Z", "cpu", 2.5)
    _manifest_run(reports, "cuda", "r1", "2026-01-01T00:00:00Z", "cuda:0", 0.5)
    db = tmp_path / "history.sqlite"
    ingest_paths(db, [reports], lambda line: None)
    out = tmp_path / "durations" / "cpu.json"
    assert main(["ci", "durations", "--matrix", "cpu", "--db", str(db), "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}: 3 tests timed on cpu, 1 sibling lanes\n"
    loaded = load(out)
    assert loaded.durations["suites/k/test_a.py::test_op[cpu-bfloat16]"] == 2.5
    assert loaded.siblings["cuda"]["suites/k/test_a.py::test_op[bfloat16]"] == 0.5
