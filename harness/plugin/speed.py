"""A kernel's speed as a result: the engine's kernel against the platform's own baseline,
timed in the same process on the same inputs, interleaved, after a warm-up.

An absolute time moves from run to run and machine to machine on a shared CI agent; a
ratio measured side by side does not (much): each pair of samples times the engine and the
baseline back to back, in alternating order: many short samples (``SAMPLE_S``, a call or
a few; ``MIN_PAIRS`` to ``MAX_PAIRS`` pairs within about ``CASE_BUDGET_S`` of sampling),
the garbage collector off. How many is calibrated on warm calls (each side's fastest of
``CALIBRATION`` timed calls after the warm-up), so a case takes as many pairs in every
run (a cold first call would set a count, and with it the fastest sample, that moves
from run to run). The ratio is the engine's fastest sample over the baseline's
(above 1, the engine is slower): a shared agent's other load only adds time, in bursts,
so each side's fastest sample is its own cost. On the 2-vCPU host of docs/speed.md the
median of the pairs' ratios moved 2-3x between identical runs; the fastest samples' ratio
of 1 ms samples by a p90 of about 20%, of 20 us samples by 8-27% (44% in a busy hour).
The spread, the interquartile range of the pairs' ratios over their median, says how
loaded the host was. On a GPU the samples are device time (its own events: CUDA's,
ROCm's through it, XPU's), not the host's.

Where a time says nothing of the platform, no speed is recorded and ``why_no_speed`` says
why: a GPU profile emulated on the CPU, a CPU emulated under qemu (a lane's x86-64 level,
or another architecture under qemu-user), Triton's interpreter.

The case's properties are results/speed.py's (one vocabulary, read by the history, the
report, ``report compare`` and ``harness bisect --slower-than``).
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.platform.host import EMULATED_ENV, FOREIGN_ENV
from harness.results.speed import BASELINE, BASELINE_US, ENGINE_US, PAIRS, RATIO, SPREAD

SPEED_ENV = "HARNESS_SPEED"  # "off": the speed tier records nothing (the cost bench's other side)
SAMPLE_S = 0.00002  # each sample times at least this long (a tiny kernel's calls repeated)
MAX_PAIRS = 1001
MIN_PAIRS = 15
CASE_BUDGET_S = 0.03  # sampling a case: a slower kernel, fewer pairs (at least MIN_PAIRS)
WARMUP = 2
CALIBRATION = 3  # timed calls a side after the warm-up: the fastest sets the samples' size


@dataclass(frozen=True, kw_only=True)
class Speed:
    ratio: float  # engine over baseline: their fastest samples'
    engine_s: float  # one engine call, its fastest sample
    baseline_s: float
    spread: float  # the interquartile range of the pairs' ratios over their median
    baseline: str  # the baseline's name (a provider)
    pairs: int

    def properties(self) -> dict[str, str]:
        return {RATIO: f"{self.ratio:.4g}", ENGINE_US: f"{self.engine_s * 1e6:.4g}",
                BASELINE_US: f"{self.baseline_s * 1e6:.4g}", SPREAD: f"{self.spread:.3g}",
                BASELINE: self.baseline, PAIRS: str(self.pairs)}


def why_no_speed(*, platform: str, emulate: bool, provider: str,
                 environ: Mapping[str, str]) -> str | None:
    """None where a time measured here says something of the platform; else why not."""
    if environ.get(SPEED_ENV, "on") == "off":
        return f"{SPEED_ENV}=off"
    if emulate:
        return (f"the {platform} profile is emulated on the CPU: a CPU time says nothing of "
                f"the {platform} device")
    if environ.get(EMULATED_ENV):
        return f"the CPU is emulated under qemu ({environ[EMULATED_ENV]}): the times are qemu's"
    if environ.get(FOREIGN_ENV):
        return (f"the {environ[FOREIGN_ENV]} CPU is emulated under qemu-user on this host: "
                "the times are qemu's")
    if provider == "triton" and environ.get("TRITON_INTERPRET") == "1":
        return "Triton runs in its interpreter here: its time is the interpreter's"
    return None


Timer = Callable[[Callable[[], Any], int], float]  # seconds for n calls


def cpu_timer(fn: Callable[[], Any], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - start


def device_timer(backend: str) -> Timer:
    """Device time of ``n`` calls on a GPU (``torch.cuda``, ROCm's too, or ``torch.xpu``):
    its events, the host's queueing left out."""
    def timer(fn: Callable[[], Any], n: int) -> float:
        import torch

        device = getattr(torch, backend)
        begin = device.Event(enable_timing=True)
        end = device.Event(enable_timing=True)
        device.synchronize()
        begin.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        return float(begin.elapsed_time(end)) / 1e3

    return timer


def timer_for(device: str) -> Timer:
    return device_timer(device) if device in ("cuda", "xpu") else cpu_timer


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def measure(engine: Callable[[], Any], baseline: Callable[[], Any], *, baseline_name: str,
            timer: Timer = cpu_timer) -> Speed:
    """Time ``engine`` against ``baseline`` (each a call on its own inputs), interleaved,
    the garbage collector off."""
    for _ in range(WARMUP):
        engine()
        baseline()
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _speed(engine, baseline, timer, baseline_name)
    finally:
        if collecting:
            gc.enable()


def _speed(engine: Callable[[], Any], baseline: Callable[[], Any], timer: Timer,
           baseline_name: str) -> Speed:
    engine_times, baseline_times, ratios = _pairs(engine, baseline, timer)
    # Other load only ever adds time, in bursts: each side's fastest sample is its own
    # cost; the pairs' spread says how loaded the machine was.
    fastest_engine, fastest_baseline = min(engine_times), min(baseline_times)
    ratio = fastest_engine / fastest_baseline if fastest_baseline > 0 else math.inf
    middle = statistics.median(ratios)
    low, high = _quartiles(ratios)
    return Speed(ratio=ratio, engine_s=fastest_engine, baseline_s=fastest_baseline,
                 spread=(high - low) / middle if middle > 0 else math.inf,
                 baseline=baseline_name, pairs=len(ratios))


def _calibrate(engine: Callable[[], Any], baseline: Callable[[], Any], timer: Timer
               ) -> tuple[float, float]:
    """Each side's fastest of CALIBRATION single calls, interleaved; a call is taken as at
    least 0.1 us."""
    engine_times, baseline_times = [], []
    for _ in range(CALIBRATION):
        engine_times.append(timer(engine, 1))
        baseline_times.append(timer(baseline, 1))
    return max(min(engine_times), 1e-7), max(min(baseline_times), 1e-7)


def _pairs(engine: Callable[[], Any], baseline: Callable[[], Any], timer: Timer
           ) -> tuple[list[float], list[float], list[float]]:
    """Per pair: one engine call's time, one baseline call's, and their ratio."""
    engine_one, baseline_one = _calibrate(engine, baseline, timer)
    calls = max(1, math.ceil(SAMPLE_S / max(engine_one, baseline_one)))  # at most 201
    pair_s = calls * (engine_one + baseline_one)
    pairs = max(MIN_PAIRS, min(MAX_PAIRS, int(CASE_BUDGET_S / pair_s)))
    engine_times, baseline_times, ratios = [], [], []
    for i in range(pairs):
        if i % 2:
            b, e = timer(baseline, calls), timer(engine, calls)
        else:
            e, b = timer(engine, calls), timer(baseline, calls)
        engine_times.append(e / calls)
        baseline_times.append(b / calls)
        ratios.append(e / b if b > 0 else math.inf)
    return engine_times, baseline_times, ratios


THREADS_ENV = "HARNESS_TORCH_THREADS"  # run/threads.py: the thread count harness budgeted


def budgeted_threads(environ: Mapping[str, str]) -> int | None:
    """The torch thread count harness budgeted this process; None where it set none (the
    user's OMP_NUM_THREADS kept, or HARNESS_THREAD_BUDGET=off)."""
    try:
        found = int(environ.get(THREADS_ENV, ""))
    except ValueError:
        return None
    return found if found > 0 else None


def threads_problem(engine: str, found: int, budget: int) -> str | None:
    """Where the engine's kernels run with another thread count than the budget, why that
    matters (a wrong thread count is a speed regression no result shows: 2-6x in the field)."""
    if found == budget:
        return None
    how = "fewer" if found < budget else "more"
    return (f"{engine}'s kernels run with {found} torch thread(s), harness budgeted {budget} "
            f"({THREADS_ENV}): {how} threads than the budget, "
            + ("the kernels run slower than the host allows" if found < budget
               else "the workers oversubscribe the CPU"))
