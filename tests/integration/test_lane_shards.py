"""A lane of several suites sharded whole suite by whole suite (shard/suites.py), end to end
through `harness run --shard` as a CI build's agents run it: a history made from a real
whole run, the durations file `harness ci durations` writes from it (each suite's wall time
beside each test's), two shards fed that file. Every suite runs on exactly one shard but the
one longer than a shard's share, which both shards split test by test; the shards' lane
plans agree (`harness ci check-shards`), and the history counts a suite's time only from a
run that ran it whole."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

from harness.history.read import recent_whole_suite_times
from harness.results.layout import Lane
from harness.shard.durations import suite_costs
from tests.runs import harness, own_suites_matrix

SHARDS = 2
LONG = """
import time

import pytest


@pytest.mark.parametrize("i", range(4))
def test_slow(i):
    time.sleep(2.5)
"""
SHORT = """
def test_quick():
    assert True
"""


def _ids(run: Path) -> dict[str, set[str]]:
    """JUnit file stem -> the test ids in it."""
    out: dict[str, set[str]] = {}
    for junit in (run / "junit").glob("*.xml"):
        out[junit.stem] = {f"{c.get('classname')}::{c.get('name')}"
                           for c in ET.parse(junit).getroot().iter("testcase")}
    return out


def _run(matrix: Path, reports: Path, *extra: str, env: dict[str, str]) -> Path:
    folder = reports / "lanes"
    before = set(folder.glob("*")) if folder.is_dir() else set()
    done = harness("run", "--matrix", str(matrix), "--python", "current", "--workers", "1",
                   "--reports", str(reports), *extra, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    (run,) = set(folder.glob("*")) - before
    return run


def test_a_lanes_suites_go_whole_to_one_shard_each_but_the_longest(tmp_path: Path) -> None:
    suites = []
    for name, body in (("long", LONG), ("alpha", SHORT), ("beta", SHORT), ("gamma", SHORT)):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"test_{name}.py").write_text(textwrap.dedent(body))
        suites.append(f"  {name}: {{path: {tmp_path / name}, workers: 1, timeout_s: 300}}")
    matrix = own_suites_matrix(tmp_path / "lanes.yaml", "lanes", suites)
    reports, db = tmp_path / "reports", tmp_path / "history.sqlite"

    whole = _run(matrix, reports, env={"HARNESS_HISTORY": str(tmp_path / "none.sqlite")})
    assert harness("history", "ingest", str(whole), "--db", str(db)).returncode == 0
    made = harness("ci", "durations", "--matrix", "lanes", "--db", str(db), "--out-dir",
                   str(tmp_path / "durations"))
    assert made.returncode == 0, made.stderr
    durations = tmp_path / "durations" / "lanes.json"
    timed = json.loads(durations.read_text())["suites"]
    assert set(timed) == {"long", "alpha", "beta", "gamma"}
    assert timed["long"]["seconds"] > sum(timed[s]["seconds"] for s in ("alpha", "beta",
                                                                        "gamma"))

    shards = []
    for index in range(1, SHARDS + 1):
        shards.append(_run(matrix, reports, "--shard", f"{index}/{SHARDS}", "--durations",
                           str(durations), env={"HARNESS_HISTORY": str(tmp_path / f"a{index}"),
                                                "HARNESS_BUILD": "build-7"}))
    got = [_ids(run) for run in shards]
    # the long suite split on both shards, its halves the whole suite's tests
    parts = [ids[f"long-shard-{i}-of-{SHARDS}"] for i, ids in enumerate(got, 1)]
    assert parts[0] and parts[1] and not parts[0] & parts[1]
    assert parts[0] | parts[1] == _ids(whole)["long"]
    # every other suite whole (its JUnit file unsharded) on exactly one shard
    for name in ("alpha", "beta", "gamma"):
        holders = [i for i, ids in enumerate(got, 1) if name in ids]
        assert len(holders) == 1, (name, [sorted(ids) for ids in got])
        assert got[holders[0] - 1][name] == _ids(whole)[name]
    assert not any(f"{n}-shard" in stem for ids in got for stem in ids
                   for n in ("alpha", "beta", "gamma"))
    plans = [json.loads((run / "shard-plans" / f"(suites)-shard-{i}-of-{SHARDS}.json")
                        .read_text()) for i, run in enumerate(shards, 1)]
    assert plans[0]["fingerprint"] == plans[1]["fingerprint"]
    assert plans[0]["split"] == ["long"]
    checked = harness("ci", "check-shards", *map(str, shards))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "(suites)" in checked.stdout and "planned alike" in checked.stdout

    # the shards' history: the whole suites' times count, the long suite's halves do not
    shard_db = tmp_path / "shards.sqlite"
    for run in shards:
        assert harness("history", "ingest", str(run), "--db", str(shard_db)).returncode == 0
    assert {t.suite for t in recent_whole_suite_times(shard_db, Lane(matrix="lanes"))} == {
        "alpha", "beta", "gamma"}
    assert set(suite_costs(shard_db, Lane(matrix="lanes"))) == {"alpha", "beta", "gamma"}
