"""harness.shard.durations: the durations file, id alignment, the history as the source."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from runs import SUITE, Runs

from harness.errors import ConfigError
from harness.results import layout
from harness.results.junit_read import read_junit
from harness.results.layout import Lane
from harness.results.manifest import RunRecord
from harness.shard.durations import DurationSet, align, dump, durations_for, load, lookup_keys


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


LANE, EMULATED = "record", "record-rocm (emulated)"


def _medians(files: list[Path], key: int) -> dict[str, float]:
    """What the durations of these files are, read plainly (0: node id, 1: device-free)."""
    seen: dict[str, list[float]] = {}
    for path in files:
        cases, _ = read_junit(path, pytest.fail)
        for case in cases:
            if key == 1 and case.status == "skipped":
                continue
            seen.setdefault((case.nodeid, case.key)[key], []).append(case.duration)
    return {test: statistics.median(values) for test, values in seen.items()}


def _junit_by_lane(reports: Path) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for folder in layout.run_folders(reports):
        found.setdefault(str(RunRecord.read(folder).lane), []).extend(layout.junit_files(folder))
    return found


def test_durations_for_takes_medians_per_lane(real_runs: Runs, tmp_path: Path) -> None:
    from harness.history import ingest_paths

    db = tmp_path / "history.sqlite"
    ingest_paths(db, [real_runs.reports], pytest.fail)
    files = _junit_by_lane(real_runs.reports)
    assert sorted(files) == [LANE, EMULATED] and len(files[LANE]) == 5
    found = durations_for(Lane(matrix=LANE), db)
    assert found.matrix == LANE
    # This lane by pytest's node ids (as the plugin recorded them), skips included; the
    # crashed run's cases after the crash are not there, its error case is no test.
    timed = _medians([p for p in files[LANE] if real_runs.crashed not in p.parents], 0)
    assert set(timed) <= set(found.durations)
    assert f"{SUITE}::test_decorated[float32]" in found.durations
    # Siblings by device-free keys, and a skip there says nothing of the cost.
    assert found.siblings == {EMULATED: _medians(files[EMULATED], 1)}
    assert f"{SUITE}::test_skipped_for_a_reason" not in found.siblings[EMULATED]
    # the emulated runs are a lane of their own, named as the history shows it
    emulated = durations_for(Lane.parse(EMULATED), db)
    assert emulated.matrix == EMULATED and set(emulated.siblings) == {LANE}
    assert emulated.durations


def test_a_lane_reads_back_from_its_text() -> None:
    lane = Lane(matrix="rocm", emulated=True)
    assert str(lane) == "rocm (emulated)" and Lane.parse(str(lane)) == lane
    assert Lane.parse("cpu") == Lane(matrix="cpu") and str(Lane(matrix="cpu")) == "cpu"


def test_durations_for_without_a_database_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"history\.sqlite: no history database"):
        durations_for(Lane(matrix="cpu"), tmp_path / "history.sqlite")


def test_ci_durations_command_writes_the_file_shards_read(
        real_runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main
    from harness.history import ingest_paths

    db = tmp_path / "history.sqlite"
    ingest_paths(db, [real_runs.reports], pytest.fail)
    out = tmp_path / "durations" / "record.json"
    assert main(["ci", "durations", "--matrix", LANE, "--db", str(db), "--out", str(out)]) == 0
    loaded = load(out)
    assert capsys.readouterr().out == (
        f"wrote {out}: {len(loaded.durations)} tests timed on {LANE}, 1 sibling lanes\n")
    assert f"{SUITE}::test_first_passes" in loaded.durations
    assert f"{SUITE}::test_first_passes" in loaded.siblings[EMULATED]
