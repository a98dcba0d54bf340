"""What running one invocation came to: data, recorded as it is in the manifest.

One shape from the runner to the history: a runner returns a :class:`SuiteOutcome`, the
manifest writer records it (its paths made relative to the run folder), the manifest
reader gives it back, and the history writer stores it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from harness.results.case_meaning import STATUSES as STATUSES
from harness.results.case_meaning import TEST_FAILURES
from harness.results.cause import Cause, CauseRecord


def count_key(status: str) -> str:
    """The key a status is counted under in a suite's ``Counts`` (manifest.json's
    ``counts``): pytest's own summary words, "3 xfailed" (schema-1 manifests wrote the
    status itself, which ``Counts.of`` reads too)."""
    return {"xfail": "xfailed", "xpass": "xpassed"}.get(status, status)


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # tests ran and some failed
    ERROR = "error"  # pytest itself reported an internal or usage error
    TIMEOUT = "timeout"  # the step ran past its time limit and was killed
    CRASHED = "crashed"  # the interpreter died (signal, exit 134 / 137)
    INTERRUPTED = "interrupted"  # Ctrl-C, or cancelled by SIGTERM / SIGHUP
    NO_JUNIT = "no-junit"  # exited without writing its JUnit file
    MOSTLY_SKIPPED = "mostly-skipped"  # nothing failed, but over max_skip_ratio skipped
    WRITE_FAILED = "write-failed"  # the harness could not write (full disk, read-only)
    NO_TESTS = "no-tests"  # nothing was collected or selected: not a pass (exit 1 unless allowed)
    NOT_APPLICABLE = "not-applicable"  # the matrix declares why the suite does not apply

    @property
    def unfinished(self) -> bool:
        """The suite stopped before all its tests ran (its results are incomplete). Not a
        meaning: whether that is a finding or the infrastructure's is its cause's
        (``results/cause.py MEANINGS``: a crash by its own SIGABRT is a finding)."""
        return self in STOPPED_WORDS and self is not Status.INTERRUPTED

    @property
    def stopped_words(self) -> str:
        """How the case the harness writes for a stopped suite says it ended."""
        return STOPPED_WORDS.get(self, "stopped")

    @classmethod
    def ended(cls, record: CauseRecord | None) -> Status:
        """The status a process's end implies before its JUnit is read (results/cause.py
        ``cause_of_exit``; None: it ended as pytest does, PASSED until JUnit says)."""
        return cls.PASSED if record is None else _STATUS_OF[record.cause]


# A cause of a process's end -> the suite's status (the causes a runner records; a test's
# failure, a refusal or an unavailable host are a run's, never a suite process's end).
_STATUS_OF: Mapping[Cause, Status] = {
    Cause.WRITE_FAILED: Status.WRITE_FAILED,
    Cause.CANCELLED: Status.INTERRUPTED,
    Cause.TIMEOUT: Status.TIMEOUT,
    Cause.SIGNAL: Status.CRASHED,
    Cause.OOM: Status.CRASHED,
    Cause.CONTAINER_GONE: Status.CRASHED,
    Cause.NO_JUNIT: Status.NO_JUNIT,
    Cause.PYTEST_ERROR: Status.ERROR,
    Cause.TEST_FAILED: Status.FAILED,
    Cause.COLLECTION_ERROR: Status.FAILED,
    Cause.INFRA_REFUSAL: Status.ERROR,
    Cause.UNAVAILABLE: Status.NOT_APPLICABLE,
}

# The statuses of a suite that stopped, and how its written case says so ("crashed").
STOPPED_WORDS: Mapping[Status, str] = {
    Status.CRASHED: "crashed",
    Status.TIMEOUT: "timed out",
    Status.INTERRUPTED: "was interrupted",
    Status.NO_JUNIT: "ended without JUnit",
    Status.ERROR: "stopped with a pytest error",
    Status.WRITE_FAILED: "could not write its results",
}


@dataclass(kw_only=True)
class Counts:
    """Test cases by outcome; xfailed and xpassed are kept apart from skipped."""

    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0
    xfailed: int = 0
    xpassed: int = 0

    @property
    def total(self) -> int:
        return sum(self.as_dict().values())

    @property
    def failing(self) -> int:
        """The cases that fail their suite (case_meaning.TEST_FAILURES: failed, strict
        xpass): the run table's "failed" column."""
        counts = self.as_dict()
        return sum(counts[count_key(status)] for status in TEST_FAILURES)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def of(cls, raw: Mapping[str, int]) -> Counts:
        values = {count_key(k): int(v) for k, v in raw.items()}
        return cls(**{key: values.get(key, 0) for key in map(count_key, STATUSES)})


@dataclass(frozen=True, kw_only=True)
class SkipReason:
    reason: str
    count: int


@dataclass(kw_only=True)
class SuiteOutcome:
    suite: str
    status: Status
    exit_code: int | None
    duration_s: float
    reason: str = ""
    # The runner's path; relative to the run folder once recorded in the manifest.
    junit: str = ""
    log: str = ""  # relative to the run folder, set when recorded
    shard: str | None = None
    counts: Counts = field(default_factory=Counts)
    log_tail: list[str] = field(default_factory=list)
    # Skips (not xfails) over all test cases; mostly_skipped above the suite's
    # max_skip_ratio, whatever the status ("mostly-skipped" only where nothing failed).
    skip_ratio: float | None = None
    mostly_skipped: bool = False
    skip_reasons: list[SkipReason] = field(default_factory=list)  # most common first
    cause: CauseRecord | None = None  # why it ended abnormally, beside the prose reason
    # The most resident memory one of its test processes held, and in which test
    # (plugin/memory.py); None where no test recorded it.
    peak_rss_mb: float | None = None
    peak_test: str = ""
    # The threads each of its test processes ran where the suite had a count of its own
    # (fewer workers than the run planned: run/plan.py); None: the run's (the manifest's
    # threads and env). harness repro gives the suite the same.
    threads: int | None = None


def failing(counts: Counts | Mapping[str, int]) -> bool:
    """Whether any case fails its suite (case_meaning.TEST_FAILURES: failed, strict
    xpass). Error cases are not here: the harness adds one for a crash, which is an
    infrastructure failure."""
    return bool((counts if isinstance(counts, Counts) else Counts.of(counts)).failing)
