"""Which provider's kernel ran for which op, counted in this process: the registry notes
each call it dispatches, and a suite that calls a provider's kernel itself (kernel_parity)
wraps it with :func:`counted`. harness's plugin reads and clears the counts per test
(harness/plugin/ops.py, the test's op record). Standard library only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

CALLS: Counter[str] = Counter()  # "provider/op" -> calls


def note(provider: str, op: str) -> None:
    CALLS[f"{provider}/{op}"] += 1


def counted(provider: str, op: str, kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel``, each call of it counted as ``provider/op``."""
    key = f"{provider}/{op}"

    def call(*args: Any, **kwargs: Any) -> Any:
        CALLS[key] += 1
        return kernel(*args, **kwargs)

    return call
