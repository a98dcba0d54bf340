"""``harness bisect --slower-than``'s rule (bisect/verdict.py ``on_speed``, ``SpeedJudge``;
bisect/run.py ``walk_in``; the flag in commands/bisect.py), each step read from a real run
folder: tests/data/bisect_speed is a ``harness run --matrix cpu --suite kernel_parity`` of
four silu_and_mul cases (its manifest and its suite's JUnit and sidecar kept), made on a
copy of this project whose torch provider scaled float16's result by 1.01: the float32
torch smoke case passed with a speed, the float16 one failed (no speed), the Triton smoke
case passed with ``speed_skipped`` (Triton's interpreter), and a case outside the speed
tier passed with neither. tests/integration/test_bisect_speed.py runs the bisect for real."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli
from harness.bisect.run import walk_in
from harness.bisect.verdict import (
    NoSpeed,
    SpeedJudge,
    Step,
    Verdict,
    on_speed,
    read_verdict,
    reference_of,
    slower,
)
from harness.errors import Exit, UsageError

RUN = Path(__file__).resolve().parents[1] / "data" / "bisect_speed"
PARITY = "suites/kernel_parity/test_parity.py::test_parity"
TIMED = f"{PARITY}[silu_and_mul-2d-odd-float32-torch-cpu]"  # speed_ratio 1.217
FAILED = f"{PARITY}[silu_and_mul-2d-odd-float16-torch-cpu]"
TRITON = f"{PARITY}[silu_and_mul-2d-odd-float32-triton-cpu]"
UNTIMED = f"{PARITY}[silu_and_mul-contiguous-1d-one-tile-odd-float32-torch-cpu]"
RATIO = 1.217
INTERPRETER = "Triton runs in its interpreter here: its time is the interpreter's"


def _step(test: str, label: str = "abc1234 subject") -> Step:
    return read_verdict(label, RUN, test)


def test_the_run_folder_gives_each_step_its_speed_or_why_none() -> None:
    timed, triton, untimed, failed = (_step(t) for t in (TIMED, TRITON, UNTIMED, FAILED))
    assert (timed.verdict, timed.status, timed.speed) == (Verdict.GOOD, "passed", RATIO)
    assert (triton.verdict, triton.speed, triton.speed_skipped) == (Verdict.GOOD, None,
                                                                   INTERPRETER)
    assert (untimed.verdict, untimed.speed, untimed.speed_skipped) == (Verdict.GOOD, None, "")
    assert (failed.verdict, failed.speed) == (Verdict.BAD, None)


@pytest.mark.parametrize("factor", [1.5, 2.0, 1.1, 3.0, 1.25])
def test_a_ratio_of_exactly_reference_times_factor_is_bad(factor: float) -> None:
    """The reference that puts the recorded 1.217 on the boundary, as a user's numbers
    would (its product need not be 1.217 to the last bit): bad."""
    reference = RATIO / factor
    step = on_speed(_step(TIMED), factor, reference)
    assert (step.verdict, step.reference) == (Verdict.BAD, reference)
    assert slower(RATIO, reference, factor)


@pytest.mark.parametrize(("ratio", "reference", "factor"), [(0.3, 0.1, 3.0),
                                                             (1.21965, 0.8131, 1.5)])
def test_the_boundary_holds_where_the_product_rounds_above_the_recorded_ratio(
        ratio: float, reference: float, factor: float) -> None:
    """0.1 x 3 is 0.30000000000000004 in floating point: a recorded 0.3 is still on it."""
    assert ratio < reference * factor  # the rounding the rule must not trip on
    step = Step(label="v==2", verdict=Verdict.GOOD, status="passed", speed=ratio)
    assert on_speed(step, factor, reference).verdict is Verdict.BAD
    below = Step(label="v==2", verdict=Verdict.GOOD, status="passed", speed=ratio * 0.9999)
    assert on_speed(below, factor, reference).verdict is Verdict.GOOD


@pytest.mark.parametrize("factor", [1.5, 2.0, 1.1])
def test_a_ratio_just_under_reference_times_factor_is_good(factor: float) -> None:
    for reference in ((RATIO + 0.0001) / factor, RATIO / factor * (1 + 1e-6)):
        step = on_speed(_step(TIMED), factor, reference)
        assert (step.verdict, step.status) == (Verdict.GOOD, "passed"), reference
        assert not slower(RATIO, reference, factor)


def test_a_step_with_no_reference_yet_is_its_own_the_good_end() -> None:
    step = on_speed(_step(TIMED), 1.5, None)
    assert (step.verdict, step.reference) == (Verdict.GOOD, RATIO)


@pytest.mark.parametrize(("test", "why"), [(TRITON, INTERPRETER), (UNTIMED, "none recorded")])
def test_a_passed_test_that_recorded_no_speed_is_unrun_saying_why(test: str, why: str) -> None:
    step = on_speed(_step(test), 1.5, 0.8)
    assert (step.verdict, step.status) == (Verdict.UNRUN, f"passed, no speed: {why}")
    assert step.line() == f"unrun abc1234 subject: passed, no speed: {why}"


def test_a_failed_test_is_unrun_on_speed_not_bad() -> None:
    """A failure is no slowdown: on speed it is left out of the verdict, its signature kept."""
    plain = _step(FAILED)
    step = on_speed(plain, 1.5, 0.8)
    assert plain.verdict is Verdict.BAD
    assert step.verdict is Verdict.UNRUN
    assert step.status == "failed, not judged on speed (the test did not pass)"
    assert step.signature == plain.signature and step.signature
    assert step.line().startswith("unrun abc1234 subject: failed, not judged on speed (the test "
                                  f"did not pass): {plain.signature}")


def test_an_unrun_step_stays_as_it_was() -> None:
    missing = _step(f"{PARITY}[nowhere]")
    assert on_speed(missing, 1.5, 0.8) == missing
    infra = Step(label="x==1", verdict=Verdict.UNRUN, status="could not run (exit 3): pip",
                 infra=True)
    assert on_speed(infra, 1.5, 0.8) == infra


def test_a_judged_step_line_shows_its_ratio_and_the_reference() -> None:
    good = on_speed(_step(TIMED), 1.5, 0.812)  # bad from 1.218
    bad = on_speed(_step(TIMED), 1.5, 0.8)
    assert good.line() == "good  abc1234 subject: passed, speed 1.22 (reference 0.81)"
    assert bad.line() == "bad   abc1234 subject: passed, speed 1.22 (reference 0.80)"
    tiny = Step(label="v==1", verdict=Verdict.GOOD, status="passed", speed=0.0123,
                reference=0.011)
    assert tiny.line() == "good  v==1: passed, speed 0.012 (reference 0.011)"


def test_the_judge_takes_the_first_step_whose_test_passed_as_the_reference() -> None:
    """A failed first step (a pin) is unrun and sets nothing; the next one that passed is the
    GOOD end, judged against itself; each later one against it."""
    judge = SpeedJudge(test=TIMED, factor=1.5)
    first = judge(_step(FAILED, "v==1"))
    assert (first.verdict, judge.reference) == (Verdict.UNRUN, None)
    good_end = judge(_step(TIMED, "v==2"))
    assert (good_end.verdict, good_end.reference, judge.reference) == (Verdict.GOOD, RATIO,
                                                                        RATIO)
    later = Step(label="v==3", verdict=Verdict.GOOD, status="passed", speed=RATIO * 1.5)
    assert judge(later).verdict is Verdict.BAD
    assert judge(Step(label="v==4", verdict=Verdict.GOOD, status="passed",
                      speed=RATIO * 1.49)).verdict is Verdict.GOOD
    assert judge(_step(TRITON, "v==5")).verdict is Verdict.UNRUN  # no speed: unjudged


@pytest.mark.parametrize(("test", "why"), [
    (TRITON, f"(speed_skipped: {INTERPRETER})"),
    (UNTIMED, "(it records none: the speed tier times one kernel_parity case per op"),
])
def test_a_good_end_that_recorded_no_speed_is_bad_input(test: str, why: str) -> None:
    judge = SpeedJudge(test=test, factor=1.5)
    with pytest.raises(NoSpeed) as raised:
        judge(_step(test, "abc1234 good"))
    message = str(raised.value)
    assert isinstance(raised.value, UsageError) and raised.value.exit_code == Exit.USAGE
    assert "\n" not in message
    assert message.startswith(f"--slower-than: bisect on speed where no case records one: "
                              f"{test} recorded no speed at abc1234 good {why}")


def test_a_bisect_refused_on_speed_leaves_nothing(tmp_path: Path) -> None:
    """The work folder and the folders made for it go; a folder that was there stays."""
    there = tmp_path / "there"
    there.mkdir()
    seen: list[Path] = []

    def refused(work: Path) -> int:
        (work / "step" / "run").mkdir(parents=True)
        seen.append(work)
        raise NoSpeed("--slower-than: bisect on speed where no case records one: x")

    with pytest.raises(NoSpeed):
        walk_in(there / "a" / "b", tmp_path, refused)
    assert seen and seen[0].is_relative_to(there / "a" / "b" / "bisect")
    assert list(tmp_path.iterdir()) == [there] and list(there.iterdir()) == []


def test_a_bisect_that_ran_keeps_its_steps(tmp_path: Path) -> None:
    def ran(work: Path) -> int:
        (work / "step.log").write_text("x\n")
        return Exit.OK

    assert walk_in(tmp_path / "r", tmp_path, ran) == Exit.OK
    assert len(list((tmp_path / "r" / "bisect").glob("*/step.log"))) == 1


@pytest.mark.parametrize(("value", "says"), [("fast", "not a factor"), ("1", "above 1"),
                                             ("0.5x", "above 1"), ("nan", "above 1")])
def test_a_factor_that_is_not_one_is_one_line_and_exit_2_before_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, says: str) -> None:
    code = cli.main(["bisect", "--matrix", "cpu", "--test", TIMED, "--commits", "a..b",
                     "--repo", str(tmp_path / "nowhere"), "--slower-than", value,
                     "--reports", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == Exit.USAGE
    assert err.count("\n") == 1 and err.startswith(f"harness: error: --slower-than {value!r}")
    assert says in err
    assert not (tmp_path / "r").exists()


def test_a_ratio_at_a_tenth_keeps_two_decimals_and_below_two_digits() -> None:
    line = Step(label="v", verdict=Verdict.GOOD, status="passed", speed=0.1,
                reference=0.05).line()
    assert line == "good  v: passed, speed 0.10 (reference 0.05)"


def test_a_step_not_judged_on_speed_shows_no_ratio() -> None:
    """A speed read but no reference (a pass/fail bisect): the line is the plain one."""
    step = Step(label="v", verdict=Verdict.GOOD, status="passed", speed=0.8)
    assert step.line() == "good  v: passed"


def test_a_reason_over_lines_is_named_by_its_first() -> None:
    step = Step(label="v", verdict=Verdict.GOOD, status="passed",
                speed_skipped="the CPU is emulated\n(second line)")
    assert on_speed(step, 1.5, 0.8).status == "passed, no speed: the CPU is emulated"
    with pytest.raises(NoSpeed) as caught:
        reference_of(step, TIMED)
    assert "(speed_skipped: the CPU is emulated)" in str(caught.value)
    assert "second line" not in str(caught.value)
