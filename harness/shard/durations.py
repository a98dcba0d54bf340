"""Where shard planning gets its durations: a JSON file every shard reads.

All shards of a job must plan from the same numbers, or they would split the suite
differently and lose or repeat tests; so the durations travel as one file (written
once per pipeline, or shipped with the checkout) rather than being read from each
agent's own history.

File format (``schema`` 1)::

    {"schema": 1, "matrix": "rocm",
     "durations": {"<test id>": seconds, ...},          # this matrix
     "siblings": {"cuda": {"<test id>": seconds, ...}},  # other matrices
     "suites": {"<suite>": {"seconds": s, "peak_mb": mb}}}  # this matrix's suites, whole

``suites`` (optional) is each suite's recent wall time and test peak memory on this lane:
what a shard plans the lane's suites from (shard/suites.py), before any suite's tests.

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

from harness.errors import ConfigError
from harness.results.jsonfile import read_json
from harness.results.layout import Lane
from harness.shard.suites import SuiteCost

SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class DurationSet:
    matrix: str | None = None
    durations: Mapping[str, float] = field(default_factory=dict)
    siblings: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    suites: Mapping[str, SuiteCost] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"schema": SCHEMA, "matrix": self.matrix,
                "durations": dict(sorted(self.durations.items())),
                "siblings": {m: dict(sorted(d.items())) for m, d in sorted(self.siblings.items())},
                "suites": {s: {"seconds": c.seconds, "peak_mb": c.peak_mb}
                           for s, c in sorted(self.suites.items())}}


def _seconds_map(raw: object, path: Path, key: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping of test id to seconds", file=str(path), key=key)
    out: dict[str, float] = {}
    for test, seconds in raw.items():
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ConfigError(f"expected seconds (a number), got {seconds!r}",
                              file=str(path), key=f"{key}.{test}")
        out[str(test)] = float(seconds)
    return out


def _suite_costs(raw: object, path: Path) -> dict[str, SuiteCost]:
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping of suite to its seconds and peak_mb",
                          file=str(path), key="suites")
    out: dict[str, SuiteCost] = {}
    for suite, cost in raw.items():
        key = f"suites.{suite}"
        if not isinstance(cost, dict):
            raise ConfigError(f"expected {{seconds, peak_mb}}, got {cost!r}", file=str(path),
                              key=key)
        values: dict[str, float | None] = {}
        for name in ("seconds", "peak_mb"):
            value = cost.get(name)
            if value is None and name == "peak_mb":
                values[name] = None
            elif isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"expected a number of at least 0, got {value!r}",
                                  file=str(path), key=f"{key}.{name}")
            else:
                values[name] = float(value)
        out[str(suite)] = SuiteCost(seconds=float(values["seconds"] or 0.0),
                                    peak_mb=values["peak_mb"])
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
            suites=_suite_costs(data.get("suites") or {}, path),
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
    emulated runs are a lane apart); every other lane becomes a sibling; each of the lane's
    suites its median wall time and its peak test memory (``suites``)."""
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
    return DurationSet(matrix=matrix, durations=medians.pop(matrix, {}), siblings=medians,
                       suites=suite_costs(db, lane, last_runs=last_runs))


def suite_costs(db: Path, lane: Lane, *, last_runs: int = 10) -> dict[str, SuiteCost]:
    """Each suite's median wall time over the lane's recent finished runs of it (a run
    whose shard ran a part of it says nothing of the whole: the history keeps the
    whole runs' times only), with its recent peak test memory."""
    from harness.history.read import recent_suite_peaks, recent_whole_suite_times

    times: dict[str, list[float]] = {}
    for row in recent_whole_suite_times(db, lane):
        found = times.setdefault(row.suite, [])
        if len(found) < last_runs:
            found.append(row.seconds)
    peaks = {p.suite: p.mb for p in recent_suite_peaks(db, lane)}
    return {suite: SuiteCost(seconds=statistics.median(seconds), peak_mb=peaks.get(suite))
            for suite, seconds in times.items()}

