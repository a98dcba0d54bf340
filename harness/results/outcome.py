"""What running one invocation came to: data, serialisable into the manifest."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


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
    def is_infra(self) -> bool:
        return self in (Status.ERROR, Status.TIMEOUT, Status.CRASHED, Status.NO_JUNIT,
                        Status.WRITE_FAILED)


@dataclass(kw_only=True)
class SuiteOutcome:
    suite: str
    status: Status
    exit_code: int | None
    duration_s: float
    reason: str = ""
    junit: str = ""
    shard: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    log_tail: list[str] = field(default_factory=list)
    # Skips (not xfails) over all test cases; mostly_skipped above the suite's limit,
    # also when the status is failed. skip_reasons: [{"reason": str, "count": int}].
    skip_ratio: float | None = None
    mostly_skipped: bool = False
    skip_reasons: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data


def failing(counts: dict[str, int]) -> bool:
    """Failed or strict-xpassed cases (a strict xpass fails the run). Error cases are
    not here: the harness adds one for a crash, which is an infrastructure failure."""
    return bool(counts.get("failed") or counts.get("xpassed"))
