"""Does a known failure still fail the way its matrix entry says it does?

Without an ``expect``, an id that is a known failure absorbs any failure there, a new
bug included (a bf16 kernel that is now wrong by 50x its tolerance, not 1.5x, stays an
xfail). An entry's ``expect`` states the failure it accepts:

    expect:
      raises: ParityError           # the exception's type, or a base class, by name
      match: out of tolerance       # a regular expression searched in the message
      headroom: {min: 1.0, max: 2}  # what the test recorded (record_property)
      max_abs_err: {max: 0.02}

as ``pytest.mark.xfail(raises=...)`` does for types. ``mismatch`` returns what differs
(expected and found), or None when the failure fits; the plugin then fails the test.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

RANGES = ("headroom", "max_abs_err")


def _recorded(properties: Iterable[tuple[str, object]], name: str) -> float | None:
    value = None
    for key, recorded in properties:
        if key == name:
            value = recorded  # the last one recorded wins, as in the JUnit file
    try:
        return None if value is None else float(str(value))
    except ValueError:
        return None


def _bound(value: object) -> int | float | None:
    """A range's end as the matrix schema checked it (a number), None where open."""
    return value if isinstance(value, int | float) else None


def mismatch(expect: Mapping[str, object], exc_types: Iterable[str], message: str,
             properties: Iterable[tuple[str, object]]) -> str | None:
    """What about this failure is outside ``expect``; None when all of it fits."""
    properties = list(properties)
    types = list(exc_types)
    problems: list[str] = []
    raises = expect.get("raises")
    if raises and raises not in types:
        problems.append(f"raises {raises}, found {types[0] if types else 'no exception'}")
    pattern = expect.get("match")
    if isinstance(pattern, str) and pattern and not re.search(pattern, message):
        first = message.strip().splitlines()[0] if message.strip() else "(empty)"
        problems.append(f"message matching {pattern!r}, found {first[:300]!r}")
    for name in RANGES:
        bounds = expect.get(name)
        if not isinstance(bounds, Mapping) or not bounds:
            continue
        low, high = _bound(bounds.get("min")), _bound(bounds.get("max"))
        value = _recorded(properties, name)
        span = f"[{'' if low is None else low}, {'' if high is None else high}]"
        if value is None:
            problems.append(f"{name} in {span}, found none recorded")
        elif (low is not None and value < low) or (high is not None and value > high):
            problems.append(f"{name} in {span}, found {value:g}")
    return "; ".join(problems) or None
