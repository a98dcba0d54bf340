"""Every provider the suite checks sees every declared value of every argument of its ops.

The domains are declared with the ops (refengine/ops/domains.py); a value no case of the
op has for a provider is a hole through which a kernel that ignores that argument (or
mishandles that scale shape, tile, layout) passes the suite. inductor gets one case per op
(each shape is a compile); its unseen values are printed in the summary, not failed.

Every case the suite gives a provider must also run on it: a case its ``supports`` turns
down is skipped, so a provider claiming too little passes unseen. The only declines
allowed are those declines.py declares (and each of those must happen).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from arg_coverage import coverage
from conftest import ONE_CASE_PROVIDERS, provider_cases, providers_for
from declines import decline_holes
from parity_cases import dtypes_for

from refengine.ops.spec import OP_NAMES
from refengine.providers import get_provider, offers


@pytest.mark.parametrize("op", OP_NAMES)
def test_every_argument_value_is_checked(op: str, platform: Any, record_property: Any) -> None:
    dtypes = dtypes_for(platform, op)
    names = [d for d in dtypes if d and getattr(torch, d, None) is not None]
    if not names:
        pytest.skip(f"{platform.name} has no dtype for {op} here")
    holes = []
    for provider in providers_for(platform, op):
        # A provider named like a capability the platform has must be usable: its parity
        # tests skip when it is not, and a broken install would pass as "skipped".
        if platform.matrix.capabilities.known(provider) and not platform.why_missing(provider):
            usable, why = get_provider(provider, platform.device).is_available()
            if not usable:
                holes.append(f"{provider} is unavailable on a platform that provides it: {why}")
        if provider in ONE_CASE_PROVIDERS:
            continue
        row = coverage(op, provider, provider_cases(op, provider, dtypes), names,
                       platform.device)
        record_property(f"coverage.{provider}.declined", "; ".join(row.declined) or "none")
        if row.missing:
            holes.append(f"{provider} never saw {', '.join(row.missing)}")
        holes.extend(decline_holes(op, provider, row.declined_cases, names, platform.device))
    assert not holes, f"{op}: " + "; ".join(holes)


def test_one_case_extras_name_real_cases() -> None:
    """A misspelt extra would quietly leave the op unchecked on a one-case provider."""
    from conftest import ONE_CASE_EXTRA
    from parity_cases import cases_for

    for op, ids in ONE_CASE_EXTRA.items():
        known = {case.id for case in cases_for(op)[1:]}
        assert set(ids) <= known, f"{op}: {sorted(set(ids) - known)} is not a later case"


def test_every_provider_declines_the_ops_it_has_no_kernel_for(platform: Any) -> None:
    """A provider claiming an op it has no kernel for would be chosen by a registry that
    lists it (the e2e provider sets list one provider for every op) and fail the call; no
    shipped matrix lists such a pair (test_selection.py), so only this sees the claim."""
    names = dict.fromkeys(name for op in OP_NAMES for name in providers_for(platform, op))
    wrong = []
    for name in names:
        provider = get_provider(name, platform.device)
        for op in (op for op in OP_NAMES if not offers(provider, op)):
            for dtype in (d for d in dtypes_for(platform, op) if d and hasattr(torch, d)):
                ok, _ = provider.supports(op, getattr(torch, dtype), {}, "contiguous")
                if ok:
                    wrong.append(f"{name} claims {op} at {dtype}")
    assert not wrong, "; ".join(wrong)
