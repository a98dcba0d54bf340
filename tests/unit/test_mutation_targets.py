"""bench/mutation.py's targets and its list of equivalent mutants stay in step with the code.

A renamed provider module, a renamed kernel function or an equivalent mutant whose line has
left its target's functions would make the mutation bench fail (or count a mutant as
explained that no longer is); this catches it without running cosmic-ray.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mutation() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_mutation", ROOT / "bench/mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _spans(mutation: ModuleType, name: str) -> list[tuple[int, int]]:
    target = mutation.TARGETS[name]
    ranges = mutation.line_ranges(ROOT / target.module, target.functions)
    return [(int(a), int(b)) for a, b in (r.split("-") for r in ranges)]


def test_every_target_names_a_module_and_functions_that_exist(mutation: ModuleType) -> None:
    for name in mutation.TARGETS:
        assert _spans(mutation, name), name


def test_every_equivalent_mutant_lies_inside_its_targets_functions(
    mutation: ModuleType,
) -> None:
    known = mutation.equivalents()
    assert known, "bench/mutation_equivalent.txt lists no equivalent mutant"
    outside = []
    for target, line, operator, occurrence in known:
        assert target in mutation.TARGETS, f"unknown target {target!r} in the equivalents"
        if not any(a <= line <= b for a, b in _spans(mutation, target)):
            outside.append(f"{target} line {line} {operator} #{occurrence}")
    assert not outside, "equivalent mutants outside their target's functions: " + "; ".join(
        outside
    )
