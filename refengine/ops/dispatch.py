"""Where an eager ``refengine::<op>`` call goes: to the router the layer above installs.

ops is the bottom of refengine: the registry and the providers import it, it imports
neither. So the custom ops (ops/custom.py) do not ask the registry for a provider; the
registry hands itself down when it is imported (``refengine.registry`` installs its
``current``), and every call then goes through its choice, as it always did.

Until the registry is imported (a process that imports only ``refengine.ops``, or only
the models) a call runs the op's reference kernel: what the registry's default, with no
priorities, chooses (``native``, always available, every op). A process that asks the
registry for another provider through the environment (REFENGINE_FORCE_PROVIDER) but
never imports it is refused, never silently served by the reference.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from refengine.ops import reference
from refengine.ops.spec import describe

# Read by the registry's default (refengine/registry.py); named here so that a call made
# before the registry is imported can refuse it.
FORCE_ENV = "REFENGINE_FORCE_PROVIDER"


class Router(Protocol):
    """What a call is handed to: ``refengine.registry.Registry``."""

    def run(self, op: str, *args: Any) -> Any: ...


_current: Callable[[], Router] | None = None


def route_through(current: Callable[[], Router]) -> None:
    """Send every call from now on to ``current()``, asked afresh per call (the registry's
    ``using`` and ``forced`` swap what it returns)."""
    global _current
    _current = current


def run(op: str, *args: Any) -> Any:
    """``op`` on ``args`` through the installed router, else its reference kernel."""
    if _current is not None:
        return _current().run(op, *args)
    forced = os.environ.get(FORCE_ENV, "").strip()
    if forced:
        raise RuntimeError(f"{FORCE_ENV}={forced}, but refengine.registry, which chooses "
                           f"the providers, was never imported: import it before calling {op}")
    describe(op, args)  # the arguments checked as the registry checks them
    return getattr(reference, op)(*args)
