"""Which declared argument values (refengine/ops/domains.py) each provider is checked on.

For one op and provider: the parity cases it gets (inductor one per op), each classified
into its argument values; a value is "seen" when a case with it runs (the provider
supports the call), "declined" when every case with it was turned down by the provider's
``supports`` (with its reason), and "missing" when no case has it at all: a gap in the
case set, which test_coverage.py fails on. The terminal summary prints both lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from parity_cases import FP8_OPS, Case

from refengine.ops.domains import classify, missing
from refengine.ops.spec import bind, describe


@dataclass
class Coverage:
    op: str
    provider: str
    seen: list[dict[str, str]] = field(default_factory=list)
    declined: dict[str, str] = field(default_factory=dict)  # "arg=value" -> why
    declined_cases: list[tuple[str, str, str]] = field(default_factory=list)  # case, dtype, why
    missing: list[str] = field(default_factory=list)


def coverage(op: str, provider_name: str, cases: Sequence[Case], dtypes: Sequence[str],
             device: str) -> Coverage:
    """What ``provider_name`` is checked on: every case on each of ``dtypes`` (the platform's
    dtype names for the op) that it runs on, the dtype counted as one more argument."""
    from refengine.providers import get_provider

    provider = get_provider(provider_name, device)
    result = Coverage(op, provider_name)
    every: list[dict[str, str]] = []
    for case in cases:
        for name in dtypes if case.dtypes is None else [d for d in dtypes if d in case.dtypes]:
            dtype = getattr(torch, name)
            fp8 = dtype if op in FP8_OPS else None
            args = case.args(torch.bfloat16 if fp8 else dtype, fp8, device, 0)
            values = {**classify(op, bind(op, args)), "dtype": name}
            every.append(values)
            info = describe(op, args)
            ok, why = provider.supports(op, info.dtype, info.shapes, info.layout)
            if ok:
                result.seen.append(values)
            else:
                result.declined_cases.append((case.id, name, why))
                for arg, value in values.items():
                    result.declined.setdefault(f"{arg}={value}", f"{case.id} {name}: {why}")
    extra = {"dtype": tuple(dtypes)}
    gaps = missing(op, result.seen, extra)
    absent = set(missing(op, every, extra))
    result.missing = [g for g in gaps if g in absent]
    result.declined = {g: result.declined.get(g, "declined") for g in gaps if g not in absent}
    return result


def summary_lines(rows: Sequence[Coverage]) -> list[str]:
    lines = []
    for row in rows:
        if not row.seen:
            why = next(iter(row.declined.values()), "declined")
            lines.append(f"{row.op} / {row.provider}: declined every case ({why})")
            continue
        if row.missing:
            lines.append(f"{row.op} / {row.provider}: never saw {', '.join(row.missing)}")
        for value, why in row.declined.items():
            lines.append(f"{row.op} / {row.provider}: declined {value} ({why})")
    return lines


def platform_coverage(profile: Any, providers_for: Any, provider_cases: Any,
                      dtypes_for: Any, ops: Any = None) -> list[Coverage]:
    from refengine.ops.spec import OP_NAMES

    rows = []
    for op in OP_NAMES:
        if ops is not None and op not in ops:
            continue
        dtypes = dtypes_for(profile, op)
        names = [n for n in dtypes if n and getattr(torch, n, None) is not None]
        if not names:
            continue
        for provider in providers_for(profile, op):
            rows.append(coverage(op, provider, provider_cases(op, provider, dtypes), names,
                                 profile.device))
    return rows
