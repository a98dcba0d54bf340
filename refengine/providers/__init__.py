"""The provider protocol and the table of known providers.

A provider is one source of kernels (plain torch, torch's fast paths, inductor, Triton,
zentorch). Each lives in ``refengine/providers/<name>_provider.py`` exposing
``make_provider(device: str) -> Provider``. A provider implements a subset of the ops in
``refengine.ops.spec`` with exactly the signatures written there.

Test-only or out-of-tree providers: name their modules in REFENGINE_PROVIDER_MODULES
(comma separated ``name=module`` pairs); the module's ``make_provider`` is used like the
built-in ones. The parity suite uses this to prove it catches injected bugs.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import torch

# Provider name -> module under refengine.providers (or a full dotted path).
BUILTIN: dict[str, str] = {
    "native": "refengine.providers.native_provider",
    "torch": "refengine.providers.torch_provider",
    "inductor": "refengine.providers.inductor_provider",
    "triton": "refengine.providers.triton_provider",
    "zentorch": "refengine.providers.zentorch_provider",
    "vllm": "refengine.providers.vllm_provider",
}
EXTRA_ENV = "REFENGINE_PROVIDER_MODULES"


@runtime_checkable
class Provider(Protocol):
    name: str

    def is_available(self) -> tuple[bool, str]:
        """(True, "") or (False, why not: missing package, wrong device, ...)."""

    def supports(self, op: str, dtype: torch.dtype, shapes: Mapping[str, Any],
                 layout: str) -> tuple[bool, str]:
        """Whether ``impl(op)`` handles this call; the reason when not.

        ``dtype`` is the op's key dtype, ``shapes`` maps tensor arguments to shapes and
        other arguments to their values, ``layout`` is "contiguous" or "strided"
        (see refengine.ops.spec.CallInfo).
        """

    def impl(self, op: str) -> Callable[..., Any]:
        """The kernel for ``op`` with the op's exact signature."""


class TableProvider:
    """A provider backed by a dict op -> callable; subclasses refine ``supports``."""

    name = "table"

    def __init__(self, device: str, impls: Mapping[str, Callable[..., Any]]) -> None:
        self.device = device
        self._impls = dict(impls)

    def is_available(self) -> tuple[bool, str]:
        return True, ""

    def ops(self) -> tuple[str, ...]:
        return tuple(self._impls)

    def supports(self, op: str, dtype: torch.dtype, shapes: Mapping[str, Any],
                 layout: str) -> tuple[bool, str]:
        if op not in self._impls:
            return False, f"{self.name} has no {op} kernel"
        return True, ""

    def impl(self, op: str) -> Callable[..., Any]:
        try:
            return self._impls[op]
        except KeyError:
            raise NotImplementedError(f"{self.name} has no {op} kernel") from None

    def __repr__(self) -> str:
        return f"<provider {self.name} on {self.device}>"


class MissingProvider:
    """Stands in for a provider whose module is absent or fails to import."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def is_available(self) -> tuple[bool, str]:
        return False, self.reason

    def supports(self, op: str, dtype: torch.dtype, shapes: Mapping[str, Any],
                 layout: str) -> tuple[bool, str]:
        return False, self.reason

    def impl(self, op: str) -> Callable[..., Any]:
        raise NotImplementedError(f"provider {self.name}: {self.reason}")


def module_table() -> dict[str, str]:
    """Built-in providers plus those named in REFENGINE_PROVIDER_MODULES."""
    table = dict(BUILTIN)
    for entry in os.environ.get(EXTRA_ENV, "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, module = entry.partition("=")
        if not sep or not name.strip() or not module.strip():
            raise ValueError(f"{EXTRA_ENV}: expected name=module, got {entry!r}")
        table[name.strip()] = module.strip()
    return table


_CACHE: dict[tuple[str, str, str], Provider] = {}


def offers(provider: Provider, op: str) -> bool:
    """Whether ``provider`` has a kernel for ``op``: its ``ops()`` when it lists them; one
    without ``ops()`` (inductor compiles the native op) serves every op."""
    ops = getattr(provider, "ops", None)
    return ops is None or op in ops()


def get_provider(name: str, device: str = "cpu") -> Provider:
    """The provider called ``name`` on ``device``; a MissingProvider when it cannot load."""
    table = module_table()
    if name not in table:
        return MissingProvider(name, f"unknown provider {name!r} (known: {', '.join(table)})")
    module_name = table[name]
    key = (name, module_name, device)
    if key not in _CACHE:
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            return MissingProvider(name, f"cannot import {module_name}: {error}")
        _CACHE[key] = module.make_provider(device)
    return _CACHE[key]

