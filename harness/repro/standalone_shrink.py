"""``--minimize``: shrink a standalone case while it fails with the same signature.

One size at a time (rows, width, k, n: the order the suite's hook lists them), each by a
binary search over its multiples of the size's step (a norm's width steps by 8) for the
smallest value that still fails the same way, assuming a smaller one that fails means
every larger one does. Views are narrowed, never copied: strides stay strides, dtypes are
left alone. Deterministic (the same trials in the same order) and bounded: at most
MAX_TRIALS scripts, and none started after the time budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_TRIALS = 24


@dataclass(frozen=True)
class Shrunk:
    sizes: dict[str, int]
    start: dict[str, int]
    trials: int
    stopped: str  # "" when every size was searched; else why it stopped early

    def summary(self) -> str:
        moves = ", ".join(f"{name} {self.start[name]} -> {self.sizes[name]}"
                          for name in self.start)
        return moves + (f" (stopped early: {self.stopped})" if self.stopped else "")


def minimize(start: dict[str, int], steps: dict[str, int],
             fails: Callable[[dict[str, int]], bool], *, budget_s: float,
             clock: Callable[[], float] = time.monotonic) -> Shrunk:
    """The smallest sizes ``fails`` still holds for, one size after another."""
    sizes = dict(start)
    trials, stopped = 0, ""
    deadline = clock() + budget_s
    for name in start:
        step = max(1, steps.get(name, 1))
        lo, hi = 1, sizes[name] // step  # in steps; hi is known to fail
        if sizes[name] % step:
            continue  # an odd size keeps its oddness: the finding may be about it
        while lo < hi:
            if trials >= MAX_TRIALS or clock() > deadline:
                stopped = (f"{MAX_TRIALS} trials" if trials >= MAX_TRIALS
                           else f"the {budget_s:g} s budget")
                return Shrunk(sizes, dict(start), trials, stopped)
            mid = (lo + hi) // 2
            trials += 1
            if fails({**sizes, name: mid * step}):
                hi = mid
            else:
                lo = mid + 1
        sizes[name] = hi * step
    return Shrunk(sizes, dict(start), trials, stopped)
