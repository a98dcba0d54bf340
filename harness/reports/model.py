"""The report as plain data: built once from the database, rendered as HTML, MD and JSON."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

# A cell of the test x platform grid is a JUnit status or one of these.
NEVER_RAN = "never-ran"  # no run of this platform in the window had the test
MISSING = "missing"  # ran earlier in the window, absent from the latest run
# Suite cells that are not plainly passed are flagged, never shown green.
SUITE_STATES = ("passed", "failed", "infra", "all-skipped", "empty", "absent")


@dataclass
class Lane:
    name: str  # matrix, plus " (emulated)"
    matrix: str
    runs: int
    latest_run: str | None
    latest_started: str | None
    latest_status: str | None
    infra_signature: str | None


@dataclass
class SuiteCell:
    lane: str
    suite: str
    state: str
    counts: dict[str, int]
    duration_s: float
    reason: str = ""

    @property
    def flagged(self) -> bool:
        return self.state != "passed"


@dataclass
class TestRow:
    key: str
    cells: dict[str, str]  # lane -> status | never-ran | missing
    notes: dict[str, str] = field(default_factory=dict)  # lane -> skip reason / message


@dataclass
class CapabilityRow:
    name: str
    parent: str | None
    hardware: bool
    provided: dict[str, bool]  # lane -> in the platform's closure
    tests: dict[str, int]  # lane -> distinct tests that ran requiring it


@dataclass
class Change:
    lane: str
    key: str
    before: str
    after: str
    message: str


@dataclass
class Streak:
    lane: str
    key: str
    runs: int
    since: str
    message: str


@dataclass
class Flake:
    lane: str
    key: str
    runs: int
    failures: int
    flips: int
    rerun_passes: int


@dataclass
class InfraEvent:
    lane: str
    run: str
    started: str
    scope: str  # run | suite | case
    name: str
    signature: str
    message: str


@dataclass
class HeadroomRow:
    lane: str
    key: str
    op: str
    dtype: str
    provider: str
    headroom: float
    max_abs_err: float | None
    atol: float | None


@dataclass
class Series:
    label: str  # op or metric
    lane: str
    key: str
    points: list[tuple[str, float]]  # (started, value), oldest first
    expected: float | None = None
    drifted: bool = False


@dataclass
class KnownFailureRow:
    lane: str
    pattern: str
    reason: str
    issue: str
    owner: str
    expires: str | None
    state: str  # now-passing | expiring | expired
    tests: list[str]


@dataclass
class Report:
    generated: str
    since: str
    until: str
    database: str
    headline: str
    lanes: list[Lane]
    suites: list[str]
    suite_grid: list[SuiteCell]
    test_grid: list[TestRow]
    test_rows_total: int
    capabilities: list[CapabilityRow]
    uncovered: list[tuple[str, str]]  # (lane, capability)
    regressions: list[Change]
    fixes: list[Change]
    streaks: list[Streak]
    flaky: list[Flake]
    infra: list[InfraEvent]
    headroom: list[HeadroomRow]
    error_trends: list[Series]
    pass_rates: list[Series]
    fusion: list[Series]
    known_failures: list[KnownFailureRow]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["suite_grid"] = [
            {**dataclasses.asdict(cell), "flagged": cell.flagged} for cell in self.suite_grid
        ]
        data["schema"] = 1
        return data
