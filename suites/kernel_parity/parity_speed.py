"""The speed tier of the parity suite: a case that passed, timed against the platform's
own baseline on the same inputs (harness/plugin/speed.py does the timing and says where a
time means nothing).

The tier is one case per op, provider and dtype: the first of the op's cases (the order the
suite generates them in) that the provider supports and that no known failure of the lane
covers. So an op whose first case is a known failure on the lane (vLLM's bf16 attention on
an AMX host) or a shape its kernel declines (vLLM's rms_norm at an odd width) is still
timed, and the choice is the same on every night and in every worker.

The baseline is torch's own implementation of the same math: the ``torch`` provider where
it has a kernel for the case, else ``native`` (the fp32 reference, the only baseline
``torch``'s own kernels have).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from harness.plugin.speed import measure, timer_for, why_no_speed
from harness.results.speed import PREPARED, SKIPPED
from refengine.providers import get_provider, offers

BASELINE = "torch"
FALLBACK = "native"
_CHOSEN: dict[tuple[str, str, str], str | None] = {}  # (op, provider, dtype) -> its case id


def speed_case(key: tuple[str, str, str], candidates: Iterable[tuple[Any, str]],
               covered: Callable[[str], bool], supported: Callable[[Any], bool]) -> str | None:
    """The case id of ``key``'s speed case: the first of ``candidates`` ((case, node id),
    in the suite's order, read only until it is found, once a process) that no known
    failure covers and the provider supports."""
    if key not in _CHOSEN:
        _CHOSEN[key] = next((case.id for case, nodeid in candidates
                             if not covered(nodeid) and supported(case)), None)
    return _CHOSEN[key]


def baseline_for(op: str, provider: str, info: Any, device: str) -> tuple[str, Callable[..., Any]]:
    """(name, kernel) of the case's baseline."""
    if provider != BASELINE:
        torch_provider = get_provider(BASELINE, device)
        if offers(torch_provider, op) and torch_provider.is_available()[0] and \
                torch_provider.supports(op, info.dtype, info.shapes, info.layout)[0]:
            return BASELINE, torch_provider.impl(op)
    return FALLBACK, get_provider(FALLBACK, device).impl(op)


def record_speed(platform: Any, op: str, provider: Any, build: Callable[[], tuple[Any, ...]],
                 info: Any, record_property: Callable[[str, object], None]) -> None:
    """Time the provider's kernel against the baseline on the case's inputs; record it, or
    why not. A provider that does work once at weight load (vLLM's GEMMs prepack their
    weight into a oneDNN handler) offers ``prepared(op, args)``: its per-call work is timed,
    as the engine pays it per token, not the load."""
    why = why_no_speed(platform=platform.name, emulate=platform.emulate,
                       provider=provider.name, environ=os.environ)
    if why is not None:
        record_property(SKIPPED, why)
        return
    name, baseline = baseline_for(op, provider.name, info, platform.device)
    engine_args, baseline_args = build(), build()
    prepare = getattr(provider, "prepared", None)
    made = prepare(op, engine_args) if prepare is not None else None
    kernel = provider.impl(op)
    call, release = made if made is not None else (lambda: kernel(*engine_args), None)
    try:
        speed = measure(call, lambda: baseline(*baseline_args), baseline_name=name,
                        timer=timer_for(platform.device))
    finally:
        if release is not None:
            release()
    for key, value in speed.properties().items():
        record_property(key, value)
    if made is not None:
        record_property(PREPARED, "true")
