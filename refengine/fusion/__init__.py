"""Fusion passes over FX graphs of refengine ops, and a torch.compile backend applying them.

from refengine.fusion import FusionBackend
backend = FusionBackend(fp8_dtype=torch.float8_e4m3fn)
compiled = torch.compile(model, backend=backend)
compiled(x); backend.report  # matched count per pass, ops left unfused, kernels
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from refengine.fusion.backend import FusionBackend, FusionReport, PassResult
    from refengine.fusion.passes import PASS_NAMES

__all__ = ["PASS_NAMES", "FusionBackend", "FusionReport", "PassResult"]


def __getattr__(name: str) -> Any:
    """The backend (and with it inductor) loads when asked for, not with the package: a
    process that needs only the fused ops (a rank checking their contract) skips it."""
    if name in ("FusionBackend", "FusionReport", "PassResult"):
        from refengine.fusion import backend

        return getattr(backend, name)
    if name == "PASS_NAMES":
        from refengine.fusion.passes import PASS_NAMES

        return PASS_NAMES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
