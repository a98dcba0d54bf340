"""Where shard planning gets its durations: a JSON file every shard reads.

All shards of a job must plan from the same numbers, or they would split the suite
differently and lose or repeat tests; so the durations travel as one file (written
once per pipeline, or shipped with the checkout) rather than being read from each
agent's own history.

File format (``schema`` 1)::

    {"schema": 1, "matrix": "rocm",
     "durations": {"<test id>": seconds, ...},          # this matrix
     "siblings": {"cuda": {"<test id>": seconds, ...}}}  # other matrices

A flat ``{"<test id>": seconds}`` mapping (pytest-split's ``.test_durations``) is read
as this matrix's durations with no siblings. Test ids are pytest node ids, either raw
or in the history's normalised form; sibling ids may also be the history's
device-free key, so ``test_x[cuda-bf16]`` on CUDA informs ``test_x[cpu-bf16]``.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.results.jsonfile import read_json
from harness.results.layout import Lane

SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class DurationSet:
    matrix: str | None = None
    durations: Mapping[str, float] = field(default_factory=dict)
    siblings: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "matrix": self.matrix,
                "durations": dict(sorted(self.durations.items())),
                "siblings": {m: dict(sorted(d.items())) for m, d in sorted(self.siblings.items())}}


def _seconds_map(raw: Any, path: Path, key: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping of test id to seconds", file=str(path), key=key)
    out: dict[str, float] = {}
    for test, seconds in raw.items():
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ConfigError(f"expected seconds (a number), got {seconds!r}",
                              file=str(path), key=f"{key}.{test}")
        out[str(test)] = float(seconds)
    return out


def load(path: Path) -> DurationSet:
    data = read_json(path, "durations file")
    if isinstance(data, dict) and "schema" in data:
        if data["schema"] != SCHEMA:
            raise ConfigError(f"unsupported schema {data['schema']!r} (expected {SCHEMA})",
                              file=str(path), key="schema")
        siblings_raw = data.get("siblings") or {}
        if not isinstance(siblings_raw, dict):
            raise ConfigError("expected a mapping of matrix to durations",
                              file=str(path), key="siblings")
        matrix = data.get("matrix")
        return DurationSet(
            matrix=str(matrix) if matrix is not None else None,
            durations=_seconds_map(data.get("durations") or {}, path, "durations"),
            siblings={str(m): _seconds_map(d, path, f"siblings.{m}")
                      for m, d in siblings_raw.items()},
        )
    return DurationSet(durations=_seconds_map(data, path, "durations"))


def dump(durations: DurationSet, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(durations.to_json(), indent=1) + "\n", encoding="utf-8")


def lookup_keys(nodeid: str) -> tuple[str, str, str]:
    """(pytest's node id, its normalised spelling, the device-free key) for one test:
    the history keys a test by pytest's id (older histories by the normalised one)."""
    from harness.results.testids import normalise_test_id, stable_ids

    return nodeid, normalise_test_id(nodeid), stable_ids(nodeid)[1]


def align(test_ids: Sequence[str], source: DurationSet
          ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Re-key the durations by the given test ids (what ``harness.shard.plan`` plans over)."""
    keys = {t: lookup_keys(t) for t in test_ids}
    own = {t: source.durations[k] for t, ks in keys.items()
           for k in _first(ks[:2], source.durations)}
    siblings = {
        name: {t: theirs[k] for t, ks in keys.items() for k in _first(ks[::-1], theirs)}
        for name, theirs in source.siblings.items()
    }
    return own, siblings


def _first(candidates: Iterable[str], mapping: Mapping[str, float]) -> list[str]:
    for key in candidates:
        if key in mapping:
            return [key]
    return []


def from_junit(files_by_matrix: Mapping[str, Iterable[Path]], matrix: str) -> DurationSet:
    """Median duration per test over the given JUnit files, this matrix and its siblings.

    This matrix is keyed by the history's node id; siblings by the device-free key.
    """
    from harness.results.junit_read import read_junit

    per_matrix: dict[str, dict[str, list[float]]] = {}
    for name, files in files_by_matrix.items():
        bucket = per_matrix.setdefault(name, {})
        for path in files:
            cases, _ = read_junit(path, _ignore)
            for case in cases:
                if case.status == "skipped" and name != matrix:
                    continue  # a skip there says nothing of what the test costs to run
                test = case.nodeid if name == matrix else case.key
                bucket.setdefault(test, []).append(case.duration)
    medians = {name: {t: statistics.median(v) for t, v in tests.items()}
               for name, tests in per_matrix.items()}
    return DurationSet(matrix=matrix, durations=medians.pop(matrix, {}), siblings=medians)


# The last runs of every lane, newest first; a case an infrastructure failure cut short
# (timeout, crash) says nothing of how long the test takes.
_HISTORY_QUERY = """
WITH recent AS (
    SELECT id, lane, row_number() OVER (PARTITION BY lane ORDER BY started DESC) AS age
    FROM runs
)
SELECT recent.lane, tests.nodeid, tests.key, cases.status, cases.duration
FROM cases JOIN recent ON cases.run = recent.id JOIN tests ON tests.id = cases.test
WHERE recent.age <= ? AND cases.duration IS NOT NULL AND cases.infra_signature IS NULL
"""


def durations_for(lane: Lane, db: Path, *, last_runs: int = 10) -> DurationSet:
    """Median durations from the history database over the last runs of ``lane`` (its
    emulated runs are a lane apart); every other lane becomes a sibling."""
    import sqlite3

    from harness.history import connect

    matrix = str(lane)  # as the history stores it
    conn = connect(db, create=False)
    try:
        rows = conn.execute(_HISTORY_QUERY, (last_runs,)).fetchall()
    except sqlite3.DatabaseError as error:
        raise ConfigError(f"cannot read durations from history ({error})", file=str(db)) from None
    finally:
        conn.close()
    per_lane: dict[str, dict[str, list[float]]] = {}
    for name, nodeid, key, status, seconds in rows:
        if name != matrix and status == "skipped":
            continue
        test = nodeid if name == matrix else key
        per_lane.setdefault(name, {}).setdefault(test, []).append(float(seconds))
    medians = {name: {t: statistics.median(v) for t, v in tests.items()}
               for name, tests in per_lane.items()}
    return DurationSet(matrix=matrix, durations=medians.pop(matrix, {}), siblings=medians)


def junit_files(reports: Path) -> dict[str, list[Path]]:
    """The JUnit files of the run folders under ``reports``, grouped by lane."""
    from harness.errors import HarnessError
    from harness.results import layout
    from harness.results.manifest import RunRecord

    found: dict[str, list[Path]] = {}
    for folder in layout.run_folders(reports):
        try:
            lane = str(RunRecord.read(folder).lane)
        except HarnessError:
            lane = folder.parent.name
        found.setdefault(lane, []).extend(layout.junit_files(folder))
    return found


def _ignore(message: str) -> None:
    """A damaged JUnit file still gives the durations it holds; estimates cover the rest."""
