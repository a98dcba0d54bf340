"""The speed tier's rules, each boundary from both sides: the band and the regression
(results/speed.py), where no speed is recorded and why (plugin/speed.py), the timing on
real work, the thread budget's check, a foreign architecture (runners/suite_env.py), and
the report's night-by-night walk (reports/speed.py)."""

from __future__ import annotations

import gc
import itertools
import math
import statistics
import time

import pytest

from harness.errors import UsageError
from harness.matrix.loader import load_matrix
from harness.plugin import speed as timing
from harness.reports.speed import _note, _walk
from harness.results import speed
from harness.runners.suite_env import foreign_arch


def test_ratio_of_keeps_only_positive_finite_numbers() -> None:
    assert speed.ratio_of("0.5") == 0.5
    for bad in (None, "", "fast", "0", "-1", "inf", "nan"):
        assert speed.ratio_of(bad) is None, bad


def test_no_band_below_three_earlier_nights_and_one_at_three() -> None:
    assert speed.band([1.0, 1.0]) is None
    found = speed.band([1.0, 1.1, 0.9])
    assert found is not None and (found.low, found.median, found.high) == (0.9, 1.0, 1.1)
    assert speed.band([5.0] + [1.0] * 7).high == 1.0  # the last seven nights only


def test_a_regression_is_the_margin_above_the_bands_top() -> None:
    band = speed.band([1.0, 1.0, 1.2])
    assert band is not None
    assert not band.regressed(1.2)  # at the top: within the band
    assert not band.regressed(1.4999)  # above the top, under the margin
    assert band.regressed(1.5)  # 1.25 x the top
    assert band.regressed(1.2, margin=0.0) and not band.regressed(1.19, margin=0.0)
    assert band.slowdown(1.5) == 1.5  # against the median
    assert speed.band([2.0, 2.0, 2.4]).slowdown(3.0) == 1.5  # type: ignore[union-attr]


@pytest.mark.parametrize("text", ["fast", "1", "0.5", "nan", "inf", ""])
def test_a_factor_that_is_not_one_is_one_line(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        speed.factor(text)
    assert "\n" not in str(caught.value) and "--slower-than" in str(caught.value)


def test_a_factor_reads_a_number_above_one() -> None:
    assert speed.factor("1.5") == 1.5
    assert speed.factor("2x") == 2.0


def test_why_no_speed_names_each_emulation_and_none_on_the_real_thing() -> None:
    def why(emulate: bool = False, provider: str = "torch", **env: str) -> str | None:
        return timing.why_no_speed(platform="rocm", emulate=emulate, provider=provider,
                                   environ=env)

    assert why() is None
    assert why(provider="triton") is None  # a compiled Triton: timed
    assert "HARNESS_SPEED=off" in (why(HARNESS_SPEED="off") or "")
    assert why(HARNESS_SPEED="on") is None
    assert "rocm profile is emulated" in (why(emulate=True) or "")
    assert "emulated under qemu (x86-64-v2)" in (why(HARNESS_EMULATED_CPU="x86-64-v2") or "")
    assert "s390x CPU is emulated under qemu-user" in (why(HARNESS_FOREIGN_ARCH="s390x") or "")
    assert "interpreter" in (why(provider="triton", TRITON_INTERPRET="1") or "")
    assert why(provider="torch", TRITON_INTERPRET="1") is None


def test_measure_finds_twice_the_work_about_twice_as_slow() -> None:
    """Real calls: a busy loop of 2 units against one of 1."""
    def work(units: int) -> None:
        end = time.perf_counter() + units * 2e-4
        while time.perf_counter() < end:
            pass

    found = timing.measure(lambda: work(2), lambda: work(1), baseline_name="one")
    assert 1.7 < found.ratio < 2.3, found
    assert found.baseline == "one" and found.pairs >= timing.MIN_PAIRS
    props = found.properties()
    assert set(props) == set(speed.PROPERTIES) and speed.ratio_of(props[speed.RATIO])


def test_measure_takes_each_sides_fastest_sample() -> None:
    """A fake clock (the real one above): bursts of load on either side do not move it."""
    calls = {"engine": 0, "baseline": 0}
    engine_times = itertools.chain([3e-3], itertools.cycle([2e-3, 9e-3]))
    baseline_times = itertools.chain([1e-3], itertools.cycle([5e-3, 1e-3]))

    def timer(fn: object, n: int) -> float:
        name = "engine" if fn is engine else "baseline"
        calls[name] += 1
        return next(engine_times if name == "engine" else baseline_times) * n

    def engine() -> None: ...
    def baseline() -> None: ...

    found = timing.measure(engine, baseline, baseline_name="b", timer=timer)
    assert found.ratio == pytest.approx(2.0) and found.engine_s == pytest.approx(2e-3)
    assert calls["engine"] == calls["baseline"] == found.pairs + timing.CALIBRATION
    # one call a sample (ms > SAMPLE_S); as many pairs as the case's budget holds of the
    # calibration's fastest calls, 2 ms and 1 ms (not of its first, 3 ms)
    assert found.pairs == max(timing.MIN_PAIRS, int(timing.CASE_BUDGET_S / 3e-3))


def test_the_thread_budget_is_read_and_checked_both_ways() -> None:
    assert timing.budgeted_threads({}) is None
    assert timing.budgeted_threads({"HARNESS_TORCH_THREADS": "x"}) is None
    assert timing.budgeted_threads({"HARNESS_TORCH_THREADS": "0"}) is None
    assert timing.budgeted_threads({"HARNESS_TORCH_THREADS": "2"}) == 2
    assert timing.threads_problem("vLLM", 2, 2) is None
    fewer = timing.threads_problem("vLLM", 1, 2) or ""
    assert "1 torch thread(s), harness budgeted 2" in fewer and "slower" in fewer
    assert "oversubscribe" in (timing.threads_problem("vLLM", 4, 2) or "")


def test_a_foreign_architecture_is_named_and_the_hosts_own_is_not() -> None:
    s390x, cpu = load_matrix("s390x"), load_matrix("cpu")
    assert foreign_arch(s390x, "x86_64") == "s390x"
    assert foreign_arch(s390x, "s390x") is None
    assert foreign_arch(cpu, "x86_64") is None  # no platform: the host's own


def test_the_walk_keeps_a_lasting_slowdown_flagged_against_the_nights_before_it() -> None:
    flags, judged_by = _walk([1.0, 1.02, 0.98, 1.0, 1.6, 1.6])
    assert flags == [False, False, False, False, True, True]
    # the band of the last night: before the slowdown
    assert judged_by == speed.band([1.0, 1.02, 0.98, 1.0])
    flags, judged_by = _walk([1.0, 1.02, 0.98, 1.01])
    # the last night's own band
    assert flags == [False] * 4 and judged_by == speed.band([1.0, 1.02, 0.98])
    assert _walk([1.0, 3.0]) == ([False, False], None)  # no band: nothing flagged


def test_the_note_says_why_a_lane_is_not_judged() -> None:
    from collections import Counter

    assert "no band yet: 0 earlier night(s)" in _note(3, Counter(), 1)
    assert "no band yet: 2 earlier night(s)" in _note(3, Counter(), 3)
    assert _note(3, Counter(), 4) == ""
    assert _note(0, Counter({"the CPU is emulated": 4}), 0).startswith(
        "no speed recorded: the CPU is emulated")


def test_a_gpu_lane_is_timed_by_the_device_and_the_cpu_by_the_host() -> None:
    """The GPU branch: device time by the GPU's events (called only where a GPU is; here
    a call says the device is missing, it is not timed by the host)."""
    import torch

    assert timing.timer_for("cpu") is timing.cpu_timer
    for device in ("cuda", "xpu"):
        timer = timing.timer_for(device)
        assert timer is not timing.cpu_timer
        if not getattr(torch, device).is_available():
            with pytest.raises((RuntimeError, AssertionError, AttributeError)):
                timer(lambda: None, 1)


class _FakeDevice:
    """A GPU backend's timing surface as device_timer uses it (torch.cuda's: Event,
    synchronize), in a log: the real one runs in the test below, on a GPU only."""

    def __init__(self) -> None:
        self.log: list[str] = []
        device = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                self.at: int | None = None

            def record(self) -> None:
                device.log.append("record")
                self.at = len(device.log)

            def synchronize(self) -> None:
                device.log.append("event synchronize")

            def elapsed_time(self, end: Event) -> float:
                assert self.at is not None and end.at is not None
                return 2.5 * (end.at - self.at - 1)  # ms: 2.5 a call between the records

        self.Event = Event

    def synchronize(self) -> None:
        self.log.append("device synchronize")


def test_the_device_timer_times_n_calls_between_two_events_in_seconds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    fake = _FakeDevice()
    monkeypatch.setattr(torch, "fakegpu", fake, raising=False)

    def call() -> None:
        fake.log.append("call")

    assert timing.device_timer("fakegpu")(call, 3) == pytest.approx(7.5e-3)
    assert fake.log == ["device synchronize", "record", "call", "call", "call", "record",
                        "event synchronize"]


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no CUDA device here")
def test_device_time_on_a_real_gpu_is_the_kernels_not_the_hosts() -> None:
    """On a GPU (CUDA or ROCm): a kernel spinning twice as many cycles times about twice as
    long, though the host only queues it (its own time is about the same for both)."""
    import torch

    def spin(cycles: int) -> object:
        return lambda: torch.cuda._sleep(cycles)

    found = timing.measure(spin(2_000_000), spin(1_000_000), baseline_name="half",
                           timer=timing.timer_for("cuda"))
    assert 1.8 < found.ratio < 2.2, found
    assert found.baseline_s > 1e-4  # a million cycles: most of a millisecond, not the queueing


class _Clock:
    """A fake timer: per call, the next time of its side's cycle; the calls in order."""

    def __init__(self, engine: list[float], baseline: list[float]) -> None:
        self.cycles = {"engine": itertools.cycle(engine), "baseline": itertools.cycle(baseline)}
        self.first = {"engine": engine[0], "baseline": baseline[0]}
        self.log: list[tuple[str, int]] = []
        self.direct = {"engine": 0, "baseline": 0}

    def fn(self, name: str) -> object:
        def call() -> None:
            self.direct[name] += 1
        call.__name__ = name
        return call

    def __call__(self, fn: object, n: int) -> float:
        name = fn.__name__  # type: ignore[attr-defined]
        self.log.append((name, n))
        if len(self.log) <= 2 * timing.CALIBRATION:  # the calibration: single calls
            return self.first[name] * n
        return next(self.cycles[name]) * n


def test_measure_warms_up_calibrates_then_alternates_the_pairs() -> None:
    clock = _Clock(engine=[10e-6, 20e-6], baseline=[5e-6])
    engine, baseline = clock.fn("engine"), clock.fn("baseline")
    found = timing.measure(engine, baseline, baseline_name="torch",  # type: ignore[arg-type]
                           timer=clock)
    assert clock.direct == {"engine": timing.WARMUP, "baseline": timing.WARMUP}
    calibration = 2 * timing.CALIBRATION
    assert clock.log[:calibration] == [("engine", 1), ("baseline", 1)] * timing.CALIBRATION
    calls = 2  # SAMPLE_S 20 us over the slower side's 10 us call
    pairs = int(timing.CASE_BUDGET_S / (calls * (10e-6 + 5e-6)))  # 999: 1000 as floats divide
    assert found.pairs == pairs and len(clock.log) == calibration + 2 * pairs
    assert all(n == calls for _, n in clock.log[calibration:])
    order = [name for name, _ in clock.log[calibration:calibration + 6]]
    assert order == ["engine", "baseline", "baseline", "engine", "engine", "baseline"]
    assert found.engine_s == pytest.approx(10e-6) and found.baseline_s == pytest.approx(5e-6)
    assert found.ratio == pytest.approx(2.0)
    # the pairs' ratios alternate 2 and 4 (one more 2): quartiles 2 and 4, median 2
    assert found.spread == pytest.approx(1.0)
    assert found.properties() == {
        speed.RATIO: "2", speed.ENGINE_US: "10", speed.BASELINE_US: "5", speed.SPREAD: "1",
        speed.BASELINE: "torch", speed.PAIRS: str(pairs)}


def test_a_slow_kernel_takes_fewer_pairs_never_under_the_minimum() -> None:
    clock = _Clock(engine=[1e-3], baseline=[1e-3])
    found = timing.measure(clock.fn("engine"), clock.fn("baseline"),  # type: ignore[arg-type]
                           baseline_name="b", timer=clock)
    assert found.pairs == timing.MIN_PAIRS and all(n == 1 for _, n in clock.log)
    assert len(clock.log) == 2 * (timing.CALIBRATION + timing.MIN_PAIRS)
    assert found.spread == 0.0 and found.ratio == 1.0


def test_a_baseline_that_takes_no_time_gives_no_finite_ratio() -> None:
    clock = _Clock(engine=[1e-5], baseline=[0.0])
    found = timing.measure(clock.fn("engine"), clock.fn("baseline"),  # type: ignore[arg-type]
                           baseline_name="b", timer=clock)
    assert found.ratio == float("inf") and speed.ratio_of(found.properties()[speed.RATIO]) is None


def test_the_quartiles_of_one_sample_and_of_several() -> None:
    assert timing._quartiles([3.0]) == (3.0, 3.0)
    assert timing._quartiles([1.0, 2.0, 3.0, 4.0, 5.0]) == (2.0, 4.0)


def test_the_host_timer_calls_the_function_n_times() -> None:
    seen: list[int] = []
    assert timing.cpu_timer(lambda: seen.append(1), 3) >= 0.0
    assert len(seen) == 3


def test_the_thread_finding_says_which_way() -> None:
    assert timing.budgeted_threads({"HARNESS_TORCH_THREADS": "1"}) == 1
    fewer = timing.threads_problem("refengine", 1, 2) or ""
    more = timing.threads_problem("refengine", 3, 2) or ""
    assert "fewer threads than the budget" in fewer and "oversubscribe" not in fewer
    assert "more threads than the budget" in more and "slower" not in more


def test_pairs_between_the_bounds_follow_the_budget_and_the_calls() -> None:
    """A 19 us call against a 5 us one: two calls a sample (20 us), 0.03 s / (2 x (19 + 5)
    us) = 625 pairs."""
    clock = _Clock(engine=[19e-6], baseline=[5e-6])
    found = timing.measure(clock.fn("engine"), clock.fn("baseline"),  # type: ignore[arg-type]
                           baseline_name="b", timer=clock)
    assert timing.CASE_BUDGET_S == 0.03 and timing.SAMPLE_S == 20e-6
    assert found.pairs == 625 and {n for _, n in clock.log[2 * timing.CALIBRATION:]} == {2}


def test_pairs_stop_at_the_most_a_case_takes() -> None:
    """A 20 us call against a 1 us one: one call a sample, 0.03 s / 21 us = 1428 pairs,
    more than a case takes."""
    clock = _Clock(engine=[20e-6], baseline=[1e-6])
    found = timing.measure(clock.fn("engine"), clock.fn("baseline"),  # type: ignore[arg-type]
                           baseline_name="b", timer=clock)
    assert found.pairs == timing.MAX_PAIRS == 1001


def test_a_cold_first_call_does_not_set_the_samples() -> None:
    """The calibration takes each side's fastest warm call: an engine whose first timed call
    is 100x slower (a cache filled, a kernel chosen) still gets the pairs its warm calls fit."""
    times = {"engine": iter([1e-3, 10e-6, 12e-6]), "baseline": iter([5e-6, 6e-6, 5e-6])}

    def timer(fn: object, n: int) -> float:
        name = fn.__name__  # type: ignore[attr-defined]
        return next(times[name], 10e-6 if name == "engine" else 5e-6) * n

    def engine() -> None: ...
    def baseline() -> None: ...

    found = timing.measure(engine, baseline, baseline_name="b", timer=timer)
    # 0.03 s / (2 calls x (10 + 5) us), 999 as floats divide; not 15, as for a 1 ms call
    assert found.pairs == int(timing.CASE_BUDGET_S / (2 * (10e-6 + 5e-6))) == 999
    assert found.engine_s == pytest.approx(10e-6) and found.ratio == pytest.approx(2.0)


def test_a_tiny_call_is_taken_as_a_tenth_of_a_microsecond() -> None:
    # 20 us / 0.1 us, rounded up as the float divides: 201 calls a sample at most
    for per_call, calls in ((1e-9, math.ceil(20e-6 / 1e-7)), (0.0, math.ceil(20e-6 / 1e-7))):
        clock = _Clock(engine=[per_call], baseline=[per_call])
        found = timing.measure(clock.fn("engine"), clock.fn("baseline"),  # type: ignore[arg-type]
                               baseline_name="b", timer=clock)
        assert {n for _, n in clock.log[2 * timing.CALIBRATION:]} == {calls}
        assert found.pairs == int(timing.CASE_BUDGET_S / (calls * 2e-7))


def test_the_spread_is_the_pairs_ratios_quartiles_over_their_median() -> None:
    engine, baseline = [10e-6, 20e-6], [5e-6, 5e-6, 10e-6]
    clock = _Clock(engine=engine, baseline=baseline)
    found = timing.measure(clock.fn("engine"), clock.fn("baseline"),  # type: ignore[arg-type]
                           baseline_name="b", timer=clock)
    ratios = [engine[i % 2] / baseline[i % 3] for i in range(found.pairs)]
    low, _, high = statistics.quantiles(ratios, n=4, method="inclusive")
    assert found.spread == pytest.approx((high - low) / statistics.median(ratios))
    assert found.ratio == pytest.approx(2.0)  # fastest 10 us over fastest 5 us


def test_an_engine_that_takes_no_time_has_no_spread_to_divide() -> None:
    clock = _Clock(engine=[0.0], baseline=[1e-5])
    found = timing.measure(clock.fn("engine"), clock.fn("baseline"),  # type: ignore[arg-type]
                           baseline_name="b", timer=clock)
    assert found.ratio == 0.0 and found.spread == float("inf")


def test_the_garbage_collector_is_back_as_it_was() -> None:
    clock = _Clock(engine=[1e-5], baseline=[1e-5])
    assert gc.isenabled()
    timing.measure(clock.fn("engine"), clock.fn("baseline"),  # type: ignore[arg-type]
                   baseline_name="b", timer=clock)
    assert gc.isenabled()
    gc.disable()
    try:
        timing.measure(clock.fn("engine"), clock.fn("baseline"),  # type: ignore[arg-type]
                       baseline_name="b", timer=clock)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_quartiles_of_two_samples() -> None:
    assert timing._quartiles([1.0, 3.0]) == (1.5, 2.5)


def test_at_least_counts_the_limit_to_a_rounding_and_nothing_below() -> None:
    assert speed.at_least(1.5, 1.5) and speed.at_least(1.6, 1.5)
    assert speed.at_least(0.3, 0.1 * 3)  # 0.30000000000000004: the same number, rounded
    assert not speed.at_least(1.4999, 1.5)
    assert not speed.at_least(0.3, 0.3 * (1 + 1e-8))  # beyond the rounding: below
