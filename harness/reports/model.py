"""The report as plain data: built once from the database, rendered as HTML, MD and JSON."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field

# A cell of the test x platform grid is a JUnit status or one of these.
NEVER_RAN = "never-ran"  # no run of this platform in the window had the test
MISSING = "missing"  # ran earlier in the window, absent from the latest run
# The test grid keeps every row with a problem and, besides, the first rows up to this
# many (the page shows these); the rest (passing everywhere) are only counted.
GRID_ROWS = 2000
# Suite cells: "undeclared" (the lane's matrix does not have the suite) is blank; every
# other state but "passed" is flagged, never shown green. "absent" is a declared suite
# that did not run.
SUITE_STATES = (
    "passed",
    "failed",
    "infra",
    "mostly-skipped",
    "all-skipped",
    "empty",
    "absent",
    "undeclared",
    "not-applicable",
)
SKIPPING = ("mostly-skipped", "all-skipped")


def anchor(kind: str, *parts: str) -> str:
    """A stable HTML id for an item, shared by the page and the Markdown links into it."""
    digest = hashlib.sha1("\0".join(parts).encode()).hexdigest()[:10]
    return f"{kind}-{digest}"


@dataclass
class LaneSummary:
    """One row of the report's lanes table: a lane's runs in the window and its latest."""

    name: str  # matrix, plus " (emulated)"
    matrix: str
    runs: int
    latest_run: str | None
    latest_started: str | None
    latest_status: str | None
    infra_label: str | None
    # why the latest run was skipped (the matrix's probe refused its host), when it was
    skipped: str = ""
    # the kernel library the engine loaded in the latest run (its device fingerprint's
    # kernel_library, e.g. "vllm _C_AVX2"), beside the CPU flags that chose it
    kernel_library: str = ""


@dataclass
class SuiteCell:
    lane: str
    suite: str
    state: str
    counts: dict[str, int]
    duration_s: float
    reason: str = ""
    peak_rss_mb: float | None = None  # the most one of its test processes held (plugin/memory.py)

    @property
    def flagged(self) -> bool:
        return self.state not in ("passed", "undeclared", "not-applicable")

    @property
    def anchor(self) -> str:
        return anchor("suite", self.lane, self.suite)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class TestRow:
    key: str
    cells: dict[str, str]  # lane -> status | never-ran | missing
    notes: dict[str, str] = field(default_factory=dict)  # lane -> skip reason / message
    short: str = ""  # the key without what every row shares (see harness.reports.ids)

    @property
    def anchor(self) -> str:
        return anchor("test", self.key)


@dataclass
class CapabilityRow:
    name: str
    parent: str | None
    hardware: bool
    provided: dict[str, bool]  # lane -> in the platform's closure
    tests: dict[str, int]  # lane -> distinct tests that ran requiring it


@dataclass
class OpRow:
    """One of the engine's ops (``namespace::op``, or refengine's ``provider/op``) across the
    lanes, as of each lane's latest night (reports/ops.py)."""

    name: str
    where: str  # where the engine defines it (the dispatcher's registration place)
    offered: dict[str, bool] = field(default_factory=dict)  # lane -> its engine offered it
    tests: dict[str, int] = field(default_factory=dict)  # lane -> distinct tests that called it
    examples: dict[str, list[str]] = field(default_factory=dict)  # lane -> a few of them
    only_emulated: bool = False  # called, but only on lanes whose CPU or GPU is emulated

    @property
    def exercised(self) -> bool:
        return any(self.tests.values())

    @property
    def state(self) -> str:
        """exercised | emulated-only | not-exercised (offered, called by no lane)."""
        if not self.exercised:
            return "not-exercised"
        return "emulated-only" if self.only_emulated else "exercised"


@dataclass
class OpCoverage:
    """A lane's share of the ops its engine offered that its tests called."""

    lane: str
    offered: int
    exercised: int
    share: float | None  # None: its engine offered nothing the runs recorded
    trend: list[tuple[str, float]]  # (night started, share), oldest first
    emulated: bool = False
    missed: list[str] = field(default_factory=list)  # offered, called by none of its tests


@dataclass
class SpeedRegression:
    """A speed-tier case of a lane's latest night slower than the lane's own band
    (results/speed.py): since which night, and the command that measures it again."""

    lane: str
    key: str
    op: str
    ratio: float  # the latest night's (engine over baseline)
    median: float  # the band's
    high: float
    nights: int  # the earlier nights the band holds
    slower: float  # ratio over the band's median
    since: str  # the first night of the slow streak
    command: str


@dataclass
class SpeedRow:
    """One op x provider x dtype of the speed tier across the lanes: each lane's latest
    ratio and its ratios per night (oldest first)."""

    name: str
    ratio: dict[str, float] = field(default_factory=dict)
    trend: dict[str, list[float]] = field(default_factory=dict)
    regressed: dict[str, bool] = field(default_factory=dict)


@dataclass
class SpeedLane:
    """A lane's speed tier: cases timed last night, its band, or why nothing is judged."""

    lane: str
    timed: int
    skipped: int
    nights: int  # nights with a speed in the window
    note: str  # "" where regressions are judged; else why not (no band yet, emulated, ...)


@dataclass
class Change:
    lane: str
    key: str
    before: str
    after: str
    message: str

    @property
    def anchor(self) -> str:
        return anchor("test", self.key)


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
    label: str
    message: str

    @property
    def anchor(self) -> str:
        return anchor("infra", self.run, self.scope, self.name)


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
    action: str = "xfail"  # xfail | skip | quarantine
    # a quarantined entry's (nights it passed, nights it ran) in the window
    nights: tuple[int, int] | None = None

    @property
    def anchor(self) -> str:
        return anchor("known", self.lane, self.pattern)

    @property
    def advice(self) -> str:
        """What to do with an entry whose test passed on the last night: remove it, unless
        it is quarantined as intermittent and has not passed every night it ran."""
        if self.nights is None:
            return "remove the entry"
        passed, ran = self.nights
        tally = f"passed {passed} of the last {ran} nights"
        if passed < ran:
            return f"intermittent: {tally}; keep it quarantined until it passes every night"
        return f"{tally}: remove the entry"


@dataclass
class SkipChange:
    """A suite that skips most of its tests in the latest run of a lane."""

    lane: str
    suite: str
    state: str  # mostly-skipped | all-skipped
    skipped: int
    total: int
    before: str | None  # the suite's state in the run before; None: no run before
    reason: str  # where the state came from (the run's own verdict or the fallback ratio)

    @property
    def new(self) -> bool:
        return self.before is not None and self.before not in SKIPPING

    @property
    def anchor(self) -> str:
        return anchor("suite", self.lane, self.suite)


@dataclass
class Tonight:
    """What changed since the previous run of each lane: the first thing a reader sees."""

    regressions: list[Change]
    fixes: list[Change]
    new_infra: list[InfraEvent]
    skipping: list[SkipChange]  # every suite skipping now; .new says whether it started

    @property
    def started_skipping(self) -> list[SkipChange]:
        return [s for s in self.skipping if s.new]

    @property
    def empty(self) -> bool:
        return not (self.regressions or self.fixes or self.new_infra or self.started_skipping)


@dataclass
class Report:
    generated: str
    since: str
    until: str
    database: str
    headline: str
    lanes: list[LaneSummary]
    suites: list[str]
    suite_grid: list[SuiteCell]
    test_grid: list[TestRow]  # see GRID_ROWS: not every test, the ones worth a row
    test_rows_total: int  # every test in the window
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
    tonight: Tonight = field(default_factory=lambda: Tonight([], [], [], []))
    ops: list[OpRow] = field(default_factory=list)  # the ops x platform view
    op_coverage: list[OpCoverage] = field(default_factory=list)
    speed_regressions: list[SpeedRegression] = field(default_factory=list)
    speed: list[SpeedRow] = field(default_factory=list)  # the speed x platform view
    speed_lanes: list[SpeedLane] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ops_not_exercised(self) -> list[str]:
        """The ops some lane's engine offered that no lane's tests called."""
        return [row.name for row in self.ops if not row.exercised and any(row.offered.values())]

    @property
    def known_passing(self) -> list[KnownFailureRow]:
        return [k for k in self.known_failures if k.state == "now-passing"]

    def to_dict(self) -> dict[str, object]:
        data = dataclasses.asdict(self)
        data["suite_grid"] = [
            {**dataclasses.asdict(cell), "flagged": cell.flagged, "anchor": cell.anchor}
            for cell in self.suite_grid
        ]
        for name in ("regressions", "fixes"):
            for item, change in zip(data[name], getattr(self, name), strict=True):
                item["anchor"] = change.anchor
        for item, known in zip(data["known_failures"], self.known_failures, strict=True):
            item["advice"] = known.advice
        data["tonight"]["started_skipping"] = [
            dataclasses.asdict(s) for s in self.tonight.started_skipping
        ]
        for item, row in zip(data["ops"], self.ops, strict=True):
            item["state"] = row.state
        data["ops_not_exercised"] = self.ops_not_exercised
        # 3: test_grid keeps the rows worth showing (GRID_ROWS); 4: ops, op_coverage;
        # 5: speed_regressions, speed, speed_lanes
        data["schema"] = 5
        return data
