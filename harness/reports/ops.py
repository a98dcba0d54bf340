"""What of the engine each lane exercised: the engine's kernel surface per lane (its runs'
``engine_ops``, plugin/ops.py) against the ops its tests called (each case's op record),
folded from the history's rows into the nightly report's ops x platform view.

A lane's cell for an op is the tests of its latest night that called it, or none; an op
its engine did not offer there is "not offered". A lane is emulated where its GPU profile
runs on the CPU (``--emulate``) or its CPU is qemu's (``cpu: {emulated: ...}``): an op
exercised only on such lanes says so. Each lane's coverage is the share of the ops its
engine offered that its tests called, per night (the trend), and the last night's.
"""

from __future__ import annotations

import json
from collections import defaultdict

from harness.history.window import WindowReader
from harness.reports.matrices import MatrixFacts
from harness.reports.model import OpCoverage, OpRow
from harness.reports.runs import Runs
from harness.results.facts import DeviceFingerprint
from harness.results.layout import Lane
from harness.results.op_record import parse

EXAMPLES = 3  # test keys shown a cell


def _surface(fingerprint: str | None) -> dict[str, str]:
    """A run's ``engine_ops``, read by the fingerprint's own reader (results/facts.py)."""
    try:
        found = DeviceFingerprint.from_json(json.loads(fingerprint or "null"))
    except (ValueError, TypeError):  # not JSON, or not an object
        return {}
    return found.engine_ops if found is not None else {}


def emulated(lane: str, facts: MatrixFacts | None) -> bool:
    """A lane whose GPU profile or CPU is emulated on the agent."""
    cpu = facts.matrix.cpu.emulated if facts is not None and facts.matrix is not None else None
    return Lane.parse(lane).emulated or cpu is not None


def op_view(db: WindowReader, runs: Runs, lanes: list[str], facts: dict[str, MatrixFacts]
            ) -> tuple[list[OpRow], list[OpCoverage]]:
    """The ops x lanes rows (every op some lane's engine offered or some test called) and
    each lane's coverage, its trend over the window's nights."""
    called: dict[int, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for run, key, text in db.op_calls(runs.ids):
        for op in parse(text or ""):
            called[run][op].add(key)
    offered: dict[str, dict[str, str]] = {}  # lane -> its latest night's surface
    tests: dict[str, dict[str, set[str]]] = {}  # lane -> op -> tests, latest night
    coverage: list[OpCoverage] = []
    for lane in lanes:
        trend: list[tuple[str, float]] = []
        surface: dict[str, str] = {}
        exercised: dict[str, set[str]] = {}
        for night, started in runs.by_lane.get(lane, ()):
            surface, exercised = {}, defaultdict(set)
            for member in runs.night(night):
                surface.update(_surface(runs.rows[member].fingerprint))
                for op, keys in called.get(member, {}).items():
                    exercised[op] |= keys
            if surface:
                trend.append((started, len(surface.keys() & exercised.keys()) / len(surface)))
        offered[lane], tests[lane] = surface, exercised
        if surface or exercised:
            hit = len(surface.keys() & exercised.keys())
            coverage.append(OpCoverage(
                lane=lane, offered=len(surface), exercised=hit,
                share=hit / len(surface) if surface else None, trend=trend,
                emulated=emulated(lane, facts.get(lane)),
                missed=sorted(surface.keys() - exercised.keys())))
    rows = []
    for op in sorted({op for ops in offered.values() for op in ops}
                     | {op for ops in tests.values() for op in ops}):
        where = next((ops[op] for ops in offered.values() if ops.get(op)), "")
        row = OpRow(name=op, where=where)
        for lane in lanes:
            keys = tests[lane].get(op, set())
            row.offered[lane] = op in offered[lane]
            row.tests[lane] = len(keys)
            if keys:
                row.examples[lane] = sorted(keys)[:EXAMPLES]
        ran_on = [lane for lane in lanes if row.tests[lane]]
        row.only_emulated = bool(ran_on) and all(emulated(lane, facts.get(lane))
                                                 for lane in ran_on)
        rows.append(row)
    return rows, coverage
