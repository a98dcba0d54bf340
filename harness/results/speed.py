"""What a case's speed is and when it got slower: the one vocabulary and the one rule.

The speed tier (plugin/speed.py) records on a case the ratio of the engine's kernel time
to the platform's baseline's, measured side by side in one process (``speed_ratio``: above
1, the engine is slower than the baseline), or why none was recorded (``speed_skipped``).
The run-folder reader, the history, the nightly report, ``report compare`` and
``harness bisect --slower-than`` read those names from here.

A regression is judged against the lane's own noise: its band is the ratios the case
recorded on the lane's earlier nights (at least ``MIN_NIGHTS`` of them, the last
``BAND_NIGHTS``); a night is a regression when its ratio is worse than the band by the
margin: at least ``MARGIN`` above the band's top (the slowest of those nights). With fewer
earlier nights there is no band yet: nothing is flagged, and the report says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import UsageError

RATIO = "speed_ratio"
SKIPPED = "speed_skipped"
ENGINE_US = "speed_engine_us"
BASELINE_US = "speed_baseline_us"
SPREAD = "speed_spread"
BASELINE = "speed_baseline"
PAIRS = "speed_pairs"
PROPERTIES = (RATIO, ENGINE_US, BASELINE_US, SPREAD, BASELINE, PAIRS)
PREPARED = "speed_prepared"  # "true": the engine's load-time work done once (its GEMMs)

MIN_NIGHTS = 3  # earlier nights a band needs
BAND_NIGHTS = 7  # the band is the last this many earlier nights
MARGIN = 0.25  # a regression is at least this far above the band's top (1.25x)


def ratio_of(text: str | None) -> float | None:
    """A recorded ratio as a number; None where it is missing, not a number, not positive
    or not finite (a ratio from a bad producer is no ratio)."""
    try:
        value = float(text or "")
    except ValueError:
        return None
    return value if value > 0 and math.isfinite(value) else None


def at_least(value: float, limit: float) -> bool:
    """``value`` is ``limit`` or more; a value that is the limit to a rounding counts (a
    ratio read back as text against a product of two: 0.3 is 0.1 x 3)."""
    return value >= limit or math.isclose(value, limit, rel_tol=1e-9)


@dataclass(frozen=True, kw_only=True)
class Band:
    low: float
    median: float
    high: float
    nights: int

    def regressed(self, ratio: float, margin: float = MARGIN) -> bool:
        return ratio >= self.high * (1 + margin)

    def slowdown(self, ratio: float) -> float:
        """How many times slower than the band's median."""
        return ratio / self.median


def band(earlier: Sequence[float]) -> Band | None:
    """The band of the earlier nights' ratios (oldest first); None with too few."""
    recent = list(earlier)[-BAND_NIGHTS:]
    if len(recent) < MIN_NIGHTS:
        return None
    return Band(low=min(recent), median=statistics.median(recent), high=max(recent),
                nights=len(recent))


def factor(text: str, what: str = "--slower-than") -> float:
    """A slowdown factor given by a user: a number above 1 (1.5, or 1.5x)."""
    raw = text.strip().lower().removesuffix("x")
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{what} {text!r}: not a factor (a number above 1, such as 1.5)") \
            from None
    if not math.isfinite(value) or value <= 1:
        raise UsageError(f"{what} {text!r}: a factor must be above 1 (1.5: half as slow "
                         "again)")
    return value
