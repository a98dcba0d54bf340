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


def durations_for(lane: Lane, db: Path, *, last_runs: int = 10) -> DurationSet:
    """Median durations from the history database over the last runs of ``lane`` (its
    emulated runs are a lane apart); every other lane becomes a sibling."""
    from harness.history.read import recent_case_times

    matrix = str(lane)  # as the history stores it

    per_lane: dict[str, dict[str, list[float]]] = {}
    for case in recent_case_times(db, last_runs=last_runs):
        if case.lane != matrix and case.status == "skipped":
            continue  # a skip there says nothing of what the test costs to run
        test = case.nodeid if case.lane == matrix else case.key
        per_lane.setdefault(case.lane, {}).setdefault(test, []).append(case.seconds)
    medians = {lane: {t: statistics.median(v) for t, v in tests.items()}
               for lane, tests in per_lane.items()}
    return DurationSet(matrix=matrix, durations=medians.pop(matrix, {}), siblings=medians)

