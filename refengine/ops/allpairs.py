"""A deterministic all-pairs (pairwise) covering set over named argument domains.

Every value of every argument occurs in some row, and so does every pair of values of
two different arguments, with far fewer rows than the full product (for five two-valued
arguments and a three-valued one: 7 rows instead of 96). A kernel bug that needs one
value, or two values together, is reached by some row.

The method is a greedy set cover over the product (small here: a few hundred rows at
most): repeatedly take the first row, in product order, that covers the most pairs not
covered yet, until none is left. No randomness, so the same domains give the same rows
on every host and run (test ids are built from them). Rows given as ``covered`` (the
hand-written cases that are kept) count as covered before the first pick; ``allowed``
rules out combinations that cannot be built (a pair only some disallowed row has is not
required).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence

Row = dict[str, str]
Pair = tuple[tuple[str, str], ...]


def pairs_of(row: Mapping[str, str], names: Sequence[str]) -> set[Pair]:
    """The value pairs one row covers (each single value, when there is one argument)."""
    items = [(name, row[name]) for name in names if name in row]
    if len(items) == 1:
        return {(items[0],)}
    return set(itertools.combinations(items, 2))


def all_pairs(domains: Mapping[str, Sequence[str]],
              allowed: Callable[[Mapping[str, str]], bool] | None = None,
              covered: Iterable[Mapping[str, str]] = ()) -> list[Row]:
    """Rows (argument -> value) that, with ``covered``, hold every allowed pair of values."""
    names = list(domains)
    if not names:
        return []
    rows = [dict(zip(names, combo, strict=True)) for combo in itertools.product(
        *(domains[n] for n in names))]
    if allowed is not None:
        rows = [row for row in rows if allowed(row)]
    row_pairs = [pairs_of(row, names) for row in rows]
    needed: set[Pair] = set().union(*row_pairs) if row_pairs else set()
    for row in covered:
        needed -= pairs_of(row, names)
    chosen: list[Row] = []
    while needed:
        best = max(range(len(rows)), key=lambda i: len(row_pairs[i] & needed))
        chosen.append(rows[best])
        needed -= row_pairs[best]
    return chosen


def uncovered(domains: Mapping[str, Sequence[str]], rows: Iterable[Mapping[str, str]],
              allowed: Callable[[Mapping[str, str]], bool] | None = None) -> list[str]:
    """``a=x & b=y`` for each allowed pair no row holds (empty for a covering set)."""
    names = list(domains)
    product = [dict(zip(names, combo, strict=True)) for combo in itertools.product(
        *(domains[n] for n in names))]
    possible: set[Pair] = set()
    for candidate in product:
        if allowed is None or allowed(candidate):
            possible |= pairs_of(candidate, names)
    for row in rows:
        possible -= pairs_of(row, names)
    return sorted(" & ".join(f"{n}={v}" for n, v in pair) for pair in possible)
