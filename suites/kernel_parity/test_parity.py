"""Every provider kernel against ``native`` with the platform's tolerances; the speed tier
(one case per op, provider and dtype: parity_speed.py) then times the kernel against the
platform's own baseline (harness/plugin/speed.py, docs/speed.md)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from conftest import CAPABILITY_GATED, provider_cases
from parity_cases import FP8_OPS, case_dtypes, dtypes_for
from parity_check import ParityError, check_case
from parity_speed import record_speed, speed_case

from refengine.ops.record import counted
from refengine.ops.spec import describe
from refengine.providers import get_provider


def test_parity(parity_param: Any, platform: Any, device: torch.device, tolerance: Any,
                seed: int, record_property: Any, request: pytest.FixtureRequest) -> None:
    op, case, dtype_name, provider_name = parity_param
    # (the plugin records the platform of every test)
    for key, value in (("op", op), ("provider", provider_name), ("dtype", dtype_name or "none")):
        record_property(key, value)
    if dtype_name is None:
        pytest.skip(f"{platform.name} has no fp8 format")
    dtype = getattr(torch, dtype_name, None)
    if dtype is None:
        pytest.skip(f"torch {torch.__version__} has no {dtype_name}")
    if provider_name in CAPABILITY_GATED and platform.known(provider_name):
        missing = platform.why_missing(provider_name)
        if missing:
            pytest.skip(missing)
    provider = get_provider(provider_name, device.type)
    ok, why = provider.is_available()
    if not ok:
        pytest.skip(f"{provider_name} unavailable: {why}")
    fp8 = dtype if op in FP8_OPS else None
    act = torch.bfloat16 if op in FP8_OPS else dtype

    def build() -> tuple[Any, ...]:
        return case.args(act, fp8, device.type, seed)

    info = describe(op, build())
    ok, why = provider.supports(op, info.dtype, info.shapes, info.layout)
    if not ok:
        pytest.skip(f"{provider_name} does not support {op} here: {why}")
    try:
        outcome = check_case(op, build, counted(provider_name, op, provider.impl(op)),
                             tolerance, case.id, case.layout)
    except ParityError as error:
        if error.outcome is not None:
            for key, value in error.outcome.properties().items():
                record_property(key, value)
        raise
    for key, value in outcome.properties().items():
        record_property(key, value)
    def supported(other: Any) -> bool:
        found = describe(op, other.args(act, fp8, device.type, seed))
        return bool(provider.supports(op, found.dtype, found.shapes, found.layout)[0])

    dtypes = dtypes_for(platform, op)
    prefix = request.node.nodeid.partition("[")[0]
    candidates = ((c, f"{prefix}[{op}-{c.id}-{dtype_name}-{provider_name}-{device.type}]")
                  for c in provider_cases(op, provider_name, dtypes)
                  if dtype_name in case_dtypes(c, dtypes))
    if speed_case((op, provider_name, dtype_name), candidates, known_failure(request.config),
                  supported) == case.id:
        record_speed(platform, op, provider, build, info, record_property)


def known_failure(config: pytest.Config) -> Any:
    """Whether a known failure of the lane (those that apply on this host) covers a node id
    (asked only while a speed case is being chosen)."""
    from harness.plugin import _stash_key

    session = config.stash[_stash_key()]
    return lambda nodeid: any(e.covers(nodeid) for e in session.entries if not e.expired)
