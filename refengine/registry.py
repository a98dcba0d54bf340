"""Pick a provider per op call from a platform's priority list, and say why.

The walk for one call: the op's priority list (from the matrix's ``kernels:``), minus
disabled names, then each candidate's ``is_available()``, then ``supports(...)``; the
first that passes wins. ``native`` is always last and always available, so a selection
never fails unless a provider is forced. ``explain`` returns the whole walk.

Environment (read when a Registry is built with ``use_env=True``, the default):
REFENGINE_FORCE_PROVIDER=name   use only this provider (an error if it cannot serve)
REFENGINE_DISABLE_PROVIDERS=a,b never use these (``native`` cannot be disabled)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from refengine.ops import dispatch, record
from refengine.ops.dispatch import FORCE_ENV
from refengine.ops.spec import OPS, CallInfo, describe
from refengine.providers import Provider, get_provider

DISABLE_ENV = "REFENGINE_DISABLE_PROVIDERS"
FALLBACK = "native"


class NoProvider(RuntimeError):
    """A forced provider cannot serve a call; the message holds every reason."""


@dataclass(frozen=True)
class Candidate:
    provider: str
    chosen: bool
    reason: str  # why rejected; for the chosen one, where it came from


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


class CapabilitiesLike(Protocol):
    """What the registry asks of a platform's capabilities (harness ``Capabilities``)."""

    def known(self, name: str) -> bool: ...

    def why_missing(self, name: str, emulate: bool = False) -> str | None: ...


class MatrixLike(Protocol):
    """What the registry reads of a harness ``Matrix`` (refengine does not import the
    harness): its kernel priorities, its device and its capabilities."""

    @property
    def kernels(self) -> Mapping[str, Sequence[str]]: ...

    @property
    def device(self) -> str: ...

    @property
    def capabilities(self) -> CapabilitiesLike: ...


class PlatformLike(Protocol):
    """A harness platform profile: its matrix, torch device and emulation."""

    @property
    def matrix(self) -> MatrixLike: ...

    @property
    def device(self) -> str: ...

    @property
    def emulate(self) -> bool: ...


def _matrix_kernels(
    matrix: MatrixLike | Mapping[str, Sequence[str]],
) -> Mapping[str, Sequence[str]]:
    kernels = matrix if isinstance(matrix, Mapping) else getattr(matrix, "kernels", None)
    if not isinstance(kernels, Mapping):
        raise TypeError(f"expected a Matrix or a kernels mapping, got {type(matrix).__name__}")
    return kernels


class Registry:
    def __init__(self, priorities: Mapping[str, Sequence[str]], disabled: Sequence[str] = (),
                 forced: str | None = None, device: str = "cpu", *,
                 use_env: bool = True, unavailable: Mapping[str, str] | None = None) -> None:
        unknown = sorted(set(priorities) - set(OPS))
        if unknown:
            raise ValueError(f"unknown op(s) in kernel priorities: {', '.join(unknown)}")
        self.priorities = {op: tuple(names) for op, names in priorities.items()}
        self.disabled = tuple(disabled)
        self.forced = forced
        if use_env:
            self.disabled += _split(os.environ.get(DISABLE_ENV, ""))
            self.forced = os.environ.get(FORCE_ENV, "").strip() or forced
        self.device = device
        # provider -> why the platform lacks it (a missing capability, e.g. under --emulate)
        self.unavailable = dict(unavailable or {})
        self._chosen: dict[tuple[Any, ...], Provider] = {}

    @classmethod
    def from_matrix(cls, matrix: MatrixLike | Mapping[str, Sequence[str]],
                    device: str | None = None, emulate: bool = False,
                    **kwargs: Any) -> Registry:
        """From a harness Matrix (its ``kernels``, ``device``, capabilities) or a mapping.

        Ops the matrix does not list fall back to ``native`` alone; provider names the
        matrix lists but this registry does not know show up as rejected in explain().
        A provider named like a capability (triton, inductor, zentorch) is unavailable
        where the platform lacks that capability (``emulate``: as emulated on the CPU).
        """
        kernels = {op: names for op, names in _matrix_kernels(matrix).items() if op in OPS}
        full = None if isinstance(matrix, Mapping) else matrix
        if device is None:
            device = "cpu" if emulate or full is None else (full.device or "cpu")
        unavailable: dict[str, str] = {}
        caps = None if full is None else full.capabilities
        if caps is not None:
            for name in {n for names in kernels.values() for n in names}:
                if caps.known(name):
                    why = caps.why_missing(name, emulate)
                    if why:
                        unavailable[name] = str(why)
        return cls(kernels, device=device, unavailable=unavailable, **kwargs)

    @classmethod
    def for_platform(cls, platform: PlatformLike, **kwargs: Any) -> Registry:
        """The registry of a harness platform profile: what the parity suite's selection
        test, ``harness kernels``, the fusion suite and the e2e "platform" set all use."""
        return cls.from_matrix(platform.matrix, device=platform.device,
                               emulate=platform.emulate, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        # Sent to spawned processes (tensor-parallel ranks): the choices are re-made there.
        return {**self.__dict__, "_chosen": {}}

    def candidates(self, op: str) -> tuple[str, ...]:
        if self.forced:
            return (self.forced,)
        names = [n for n in self.priorities.get(op, ()) if n != FALLBACK]
        return (*dict.fromkeys(names), FALLBACK)

    def explain(self, op: str, dtype: torch.dtype, shapes: Mapping[str, Any] | None = None,
                layout: str = "contiguous") -> list[Candidate]:
        if op not in OPS:
            raise ValueError(f"unknown op {op!r} (known: {', '.join(OPS)})")
        shapes = shapes or {}
        out: list[Candidate] = []
        chosen = False
        for name in self.candidates(op):
            if chosen:
                out.append(Candidate(name, False, "not reached: an earlier provider was chosen"))
                continue
            reason = self._reject_reason(name, op, dtype, shapes, layout)
            if reason is None:
                chosen = True
                why = "forced" if self.forced else self._origin(op, name)
                out.append(Candidate(name, True, why))
            else:
                out.append(Candidate(name, False, reason))
        return out

    def _origin(self, op: str, name: str) -> str:
        listed = self.priorities.get(op, ())
        if name in listed:
            return f"priority {listed.index(name) + 1} of {len(listed)}"
        return "fallback"

    def _reject_reason(self, name: str, op: str, dtype: torch.dtype,
                       shapes: Mapping[str, Any], layout: str) -> str | None:
        if name in self.disabled and name != FALLBACK:
            return "disabled"
        if name in self.unavailable and name != FALLBACK:
            return f"unavailable: {self.unavailable[name]}"
        provider = get_provider(name, self.device)
        ok, reason = provider.is_available()
        if not ok:
            return f"unavailable: {reason}"
        ok, reason = provider.supports(op, dtype, shapes, layout)
        if not ok:
            return f"unsupported: {reason}"
        return None

    def select(self, op: str, dtype: torch.dtype, shapes: Mapping[str, Any] | None = None,
               layout: str = "contiguous") -> Provider:
        walk = self.explain(op, dtype, shapes, layout)
        for candidate in walk:
            if candidate.chosen:
                return get_provider(candidate.provider, self.device)
        reasons = "; ".join(f"{c.provider}: {c.reason}" for c in walk)
        raise NoProvider(f"no provider for {op} ({dtype}): {reasons}")

    def select_call(self, info: CallInfo) -> Provider:
        key = info.key()
        provider = self._chosen.get(key)
        if provider is None:
            provider = self.select(info.op, info.dtype, info.shapes, info.layout)
            self._chosen[key] = provider
        return provider

    def run(self, op: str, *args: Any) -> Any:
        """Call ``op`` through the selected provider (what the custom ops do), counted in
        the test's op record (refengine/ops/record.py)."""
        provider = self.select_call(describe(op, args))
        record.note(provider.name, op)
        return provider.impl(op)(*args)

    def with_forced(self, name: str | None) -> Registry:
        clone = replace_registry(self)
        clone.forced = name
        return clone

    def table(self, dtype: torch.dtype, shapes: Mapping[str, Mapping[str, Any]] | None = None,
              ops: Sequence[str] | None = None) -> dict[str, str]:
        """op -> chosen provider name, for the selection-table assertions."""
        shapes = shapes or {}
        return {op: self.select(op, dtype, shapes.get(op)).name for op in (ops or OPS)}


def replace_registry(registry: Registry) -> Registry:
    clone = Registry(registry.priorities, registry.disabled, registry.forced,
                     registry.device, use_env=False, unavailable=registry.unavailable)
    return clone


_current: Registry | None = None


def current() -> Registry:
    """The registry the custom ops consult; native-only (plus env) until configured."""
    global _current
    if _current is None:
        _current = Registry({})
    return _current


def set_current(registry: Registry | None) -> Registry | None:
    """Install ``registry`` (None: back to the default); returns the previous one."""
    global _current
    previous, _current = _current, registry
    return previous


@contextlib.contextmanager
def using(registry: Registry) -> Iterator[Registry]:
    previous = set_current(registry)
    try:
        yield registry
    finally:
        set_current(previous)


@contextlib.contextmanager
def forced(name: str) -> Iterator[Registry]:
    """Temporarily send every op to provider ``name`` (an error where it cannot serve)."""
    with using(current().with_forced(name)) as registry:
        yield registry


# The custom ops (refengine/ops/custom.py) call through the current registry from now on.
dispatch.route_through(current)


__all__ = ["Candidate", "NoProvider", "Registry", "current", "forced", "set_current", "using"]
