"""Estimate a never-timed test's duration from its parameters, fitted on the timed ones.

A test id says what the test does: its module and function, and parameter tokens
(``test_parity[rms_norm-2d-odd-bfloat16-torch-cpu]``: op, case, dtype, provider,
device). The model is additive in log seconds:

    log(seconds) = mean + module + function + sum(token effects) + sum(slope * log(size))

with one effect per token seen in the history, and for tokens carrying numbers (shapes
like ``k200``, ``n130``, ``top3``) a slope per token pattern (``k#``) on the log of the
number. It is a ridge least-squares fit, solved by Gauss-Seidel (backfitting) in pure
Python: no numpy at the harness's start-up, the same result on every shard.

A test only gets a model estimate when the fit saw at least one of its tokens or its
function; otherwise the caller falls back to the module median.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass


def module_of(test_id: str) -> str:
    """The file (or JUnit classname) part of a test id."""
    return test_id.split("::", 1)[0]


RIDGE = 0.05  # pulls rare tokens' effects toward zero (in units of tests)
ITERATIONS = 30
MIN_TIMED = 8
# A token seen on fewer timed tests than this cannot be told from their noise (a unique
# case name would soak up its test's whole residual): it gets no effect.
MIN_SUPPORT = 3  # fewer timed tests than this: no model
_NUMBER = re.compile(r"\d+")
# A size-like token: a short prefix and a number (k200, n130, top3, 4d), not a dtype name.
_SIZE = re.compile(r"[A-Za-z]{0,4}\d+[A-Za-z]?")
_FLOOR = 1e-4  # seconds; log of a zero duration


@dataclass(frozen=True, kw_only=True)
class Features:
    cats: tuple[str, ...]  # categorical features (each with weight 1)
    nums: tuple[tuple[str, float], ...]  # (pattern, log size) slopes


def features(test_id: str) -> Features:
    head, bracket, params = test_id.partition("[")
    module = module_of(head)
    function = head.rsplit("::", 1)[-1] if "::" in head else head
    cats = [f"m:{module}", f"f:{module}::{function}"]
    nums: list[tuple[str, float]] = []
    if bracket:
        for position, token in enumerate(params.rstrip("]").split("-")):
            if not token:
                continue
            cats.append(f"t:{token}")
            numbers = [int(n) for n in _NUMBER.findall(token)] if _SIZE.fullmatch(token) else []
            if numbers:
                pattern = _NUMBER.sub("#", token)
                cats.append(f"p:{pattern}@{position}")
                nums.append((f"n:{pattern}", math.log1p(sum(numbers))))
    return Features(cats=tuple(dict.fromkeys(cats)), nums=tuple(nums))


@dataclass(frozen=True, kw_only=True)
class DurationModel:
    mean: float
    effects: Mapping[str, float]
    slopes: Mapping[str, float]
    num_means: Mapping[str, float]
    # half the residual variance: exp(log estimate + this) is the expected seconds of a
    # log-normal spread, which is what shard loads add up (the median would undercount).
    # The mean of exp(residual) (smearing) fits a heavy tail better on paper, but on a
    # real run, whose tail is a first compile in each process, it multiplied every guess
    # by ~3 and unbalanced the plan (bench/shard_balance.py --junit)
    spread: float = 0.0
    # the relative standard deviation of a test's seconds about its estimate, from the
    # same residuals: how far one guess strays (a shard's sum of m guesses, ~cv/sqrt(m))
    cv: float = 1.0

    def knows(self, test_id: str) -> bool:
        f = features(test_id)
        # the module alone is what the median fallback already knows
        return any(c in self.effects for c in f.cats[1:]) or any(
            p in self.slopes for p, _ in f.nums)

    def predict(self, test_id: str) -> float:
        f = features(test_id)
        log_s = self.mean + sum(self.effects.get(c, 0.0) for c in f.cats)
        log_s += sum(self.slopes.get(p, 0.0) * (x - self.num_means.get(p, x)) for p, x in f.nums)
        return math.exp(log_s + self.spread)


def fit(durations: Mapping[str, float]) -> DurationModel | None:
    """Ridge least squares of log seconds on the id features (None: too little history)."""
    rows = [(features(t), math.log(max(s, _FLOOR))) for t, s in sorted(durations.items())
            if math.isfinite(s) and s >= 0]
    if len(rows) < MIN_TIMED:
        return None
    mean = sum(y for _, y in rows) / len(rows)
    # numeric covariates are centred per pattern so the slope does not fight the mean
    sums: dict[str, list[float]] = {}
    for f, _ in rows:
        for p, x in f.nums:
            sums.setdefault(p, []).append(x)
    num_means = {p: sum(v) / len(v) for p, v in sums.items()}
    members: dict[str, list[int]] = {}
    slope_rows: dict[str, list[tuple[int, float]]] = {}
    for i, (f, _) in enumerate(rows):
        for c in f.cats:
            members.setdefault(c, []).append(i)
        for p, x in f.nums:
            slope_rows.setdefault(p, []).append((i, x - num_means[p]))
    members = {c: idx for c, idx in members.items() if len(idx) >= MIN_SUPPORT}
    slope_rows = {p: pairs for p, pairs in slope_rows.items()
                  if len({x for _, x in pairs}) >= MIN_SUPPORT}
    effects = dict.fromkeys(members, 0.0)
    slopes = dict.fromkeys(slope_rows, 0.0)
    resid = [y - mean for _, y in rows]
    for _ in range(ITERATIONS):
        for c in sorted(members):
            idx = members[c]
            old = effects[c]
            new = (sum(resid[i] for i in idx) + old * len(idx)) / (len(idx) + RIDGE)
            if new != old:
                for i in idx:
                    resid[i] -= new - old
                effects[c] = new
        for p in sorted(slope_rows):
            pairs = slope_rows[p]
            old = slopes[p]
            sxx = sum(x * x for _, x in pairs)
            new = (sum(x * (resid[i] + old * x) for i, x in pairs)) / (sxx + RIDGE)
            if new != old:
                for i, x in pairs:
                    resid[i] -= (new - old) * x
                slopes[p] = new
    var = sum(r * r for r in resid) / max(1, len(resid) - 1)
    first = sum(math.exp(r) for r in resid) / len(resid)
    second = sum(math.exp(2 * r) for r in resid) / len(resid)
    return DurationModel(mean=mean, effects=effects, slopes=slopes, num_means=num_means,
                         spread=var / 2, cv=math.sqrt(max(0.0, second / first ** 2 - 1)))
