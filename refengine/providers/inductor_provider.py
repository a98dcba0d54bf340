"""``inductor``: torch.compile of the native reference, one compiled callable per (op, dtype).

Shapes are static (dynamic=False): each new shape is one more compile, so callers
(the parity suite, the engine) keep the set of shapes small. Ops whose native form is
data-dependent (a paged gather sized by context_lens, expert routing by nonzero) would
graph-break per call and are not offered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import torch

from refengine.ops import reference
from refengine.ops.spec import OP_NAMES, OPS, describe
from refengine.providers import TableProvider

DATA_DEPENDENT = {
    "attention_decode": "native form gathers by context_lens (data-dependent); "
                        "inductor would graph-break per sequence",
    "fused_moe": "native form routes with nonzero (data-dependent); "
                 "inductor would graph-break per expert",
}
# All (op, dtype, shape) specialisations share one code object per op, and dynamo falls
# back to eager silently past its recompile limit: raise it so compiled stays compiled.
RECOMPILE_LIMIT = 64


class InductorProvider(TableProvider):
    name = "inductor"

    def __init__(self, device: str) -> None:
        super().__init__(device, {op: self._dispatcher(op) for op in OP_NAMES
                                  if op not in DATA_DEPENDENT})
        self._compiled: dict[tuple[str, torch.dtype], Callable[..., Any]] = {}
        self._lock = threading.Lock()
        self.compiles = 0  # compiled callables created (one per (op, dtype))

    def is_available(self) -> tuple[bool, str]:
        try:
            import torch._inductor  # noqa: F401
        except ImportError as error:  # pragma: no cover - stripped builds
            return False, f"torch._inductor does not import: {error}"
        return True, ""

    def supports(self, op: str, dtype: torch.dtype, shapes: Mapping[str, Any],
                 layout: str) -> tuple[bool, str]:
        if op in DATA_DEPENDENT:
            return False, DATA_DEPENDENT[op]
        return super().supports(op, dtype, shapes, layout)

    def compiled(self, op: str, dtype: torch.dtype) -> Callable[..., Any]:
        key = (op, dtype)
        with self._lock:
            fn = self._compiled.get(key)
            if fn is None:
                import torch._dynamo

                config = torch._dynamo.config
                # torch < 2.7 (Debian's 2.6 on s390x) calls them cache_size_limit
                one, total = (("recompile_limit", "accumulated_recompile_limit")
                              if hasattr(config, "recompile_limit")
                              else ("cache_size_limit", "accumulated_cache_size_limit"))
                setattr(config, one, max(getattr(config, one), RECOMPILE_LIMIT))
                setattr(config, total, max(getattr(config, total), RECOMPILE_LIMIT * len(OPS)))
                fn = torch.compile(getattr(reference, op), dynamic=False,
                                   backend="inductor")
                self._compiled[key] = fn
                self.compiles += 1
        return fn

    def _dispatcher(self, op: str) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            return self.compiled(op, describe(op, args).dtype)(*args)

        run.__name__ = f"inductor_{op}"
        return run


def make_provider(device: str) -> InductorProvider:
    return InductorProvider(device)
