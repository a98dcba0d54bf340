"""What a run of a matrix would do with each op on this host: ``harness kernels``.

Per op and dtype, the registry's walk for the engine-shaped call (the one the kernel_parity
suite's selection test judges), then what the suite's own cases show beside it: case
families that go to another provider (a head size the library lacks), the known failures
that hold here for the chosen provider (their action and signature, from the matrix with
this host's CPU flags), and what the engine itself does when that failure happens (a
known failure's ``engine_fallback``). The calls come from the suites' ``kernel_calls``
hook (platform/suite_hooks.py), so the shapes are the ones the suite runs, never an empty
case. Runs in the matrix's environment (refengine and the providers imported there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

from harness.matrix.known_failures import Entry, match


class Step(Protocol):
    """One candidate of a registry walk (refengine's ``Candidate``)."""

    @property
    def provider(self) -> str: ...

    @property
    def chosen(self) -> bool: ...

    @property
    def reason(self) -> str: ...


class KernelCall(TypedDict):
    """One call a suite's ``kernel_calls`` hook yields (docs/byo-suite.md)."""

    op: str
    dtype: str
    case: str
    engine: bool  # the engine-shaped call of the op, not a parity case
    args: Callable[[], tuple[object, ...]]  # builds the call's arguments
    test_id: str  # the case's node id with ``{provider}`` left to fill ("" for the engine's)


# (op, dtype name, args) -> registry walk
Explain = Callable[[str, str, tuple[object, ...]], Sequence[Step]]


@dataclass(frozen=True)
class Family:
    """Parity cases whose call goes to ``provider`` (the engine call's or another)."""

    provider: str
    cases: tuple[str, ...]
    why: str  # why the providers before it were passed over ("" for the engine's)


@dataclass(frozen=True)
class Known:
    """A known failure that holds here for the chosen provider's cases."""

    provider: str
    entry: Entry
    cases: int
    of: int


@dataclass
class OpRow:
    op: str
    dtype: str
    walk: Sequence[Step]  # the registry's Candidates for the engine-shaped call
    families: list[Family] = field(default_factory=list)
    known: list[Known] = field(default_factory=list)

    @property
    def chosen(self) -> str:
        return chosen_in(self.walk)


def chosen_in(walk: Sequence[Step]) -> str:
    """The provider a registry walk chose ("-": none)."""
    return next((c.provider for c in walk if c.chosen), "-")


def signature(entry: Entry) -> str:
    """A known failure's expected failure in words (its ``expect``), or its action alone."""
    expect = entry.expect or {}
    parts = []
    if expect.get("raises"):
        parts.append(f"raises {expect['raises']}")
    if expect.get("match"):
        parts.append(f"matching {expect['match']!r}")
    for key in ("headroom", "max_abs_err"):
        bound = expect.get(key)
        if isinstance(bound, dict):
            parts.append(f"{key} {bound.get('min', '-')}..{bound.get('max', '-')}")
    return ", ".join(parts) or "any failure"


def _reason_chain(walk: Sequence[Step]) -> str:
    return "; ".join(f"{c.provider}: {c.reason}" for c in walk if not c.chosen
                     and not c.reason.startswith("not reached"))


def rows(calls: Iterable[KernelCall], explain: Explain, entries: Sequence[Entry],
         ops: Sequence[str] = (), dtype: str | None = None) -> list[OpRow]:
    """One row per (op, dtype) of the calls, in their order."""
    walks: dict[tuple[str, str], Sequence[Step]] = {}
    cases: dict[tuple[str, str], dict[str, list[str]]] = {}
    whys: dict[tuple[str, str, str], str] = {}
    hits: dict[tuple[str, str], dict[tuple[str, int], tuple[Entry, int]]] = {}
    for call in calls:
        key = (call["op"], call["dtype"])
        if (ops and key[0] not in ops) or (dtype and key[1] != dtype):
            continue
        walk = explain(call["op"], call["dtype"], call["args"]())
        if call["engine"]:
            walks[key] = walk
            continue
        chosen = chosen_in(walk)
        cases.setdefault(key, {}).setdefault(chosen, []).append(call["case"])
        whys.setdefault((*key, chosen), _reason_chain(walk))
        test_id = call["test_id"].format(provider=chosen) if call["test_id"] else ""
        entry = match(entries, test_id) if test_id else None
        if entry is not None:
            seen = hits.setdefault(key, {})
            count = seen.get((chosen, id(entry)), (entry, 0))[1]
            seen[(chosen, id(entry))] = (entry, count + 1)
    out = []
    for key, walk in walks.items():
        by_provider = cases.get(key, {})
        families = [Family(p, tuple(names), whys[(*key, p)]) for p, names in by_provider.items()]
        known = [Known(provider, entry, count, len(by_provider.get(provider, ())))
                 for (provider, _), (entry, count) in hits.get(key, {}).items()]
        out.append(OpRow(op=key[0], dtype=key[1], walk=walk, families=families, known=known))
    return out


def render(table: Sequence[OpRow]) -> list[str]:
    """The table as lines: each candidate of the engine-shaped call, then indented notes."""
    width = max([len(r.op) for r in table] + [10])
    lines = [f"{'op':<{width}}  {'dtype':<16} {'provider':<10} {'':<8} reason"]
    pad = " " * (width + 2 + 17 + 11 + 9)
    for row in table:
        for cand in row.walk:
            mark = "CHOSEN" if cand.chosen else "-"
            fails = cand.chosen and any(k.provider == cand.provider and k.cases == k.of
                                        for k in row.known)
            why = cand.reason + ("; fails on every case here: known failure below"
                                 if fails else "")
            lines.append(f"{row.op:<{width}}  {row.dtype:<16} {cand.provider:<10} "
                         f"{mark:<8} {why}")
        lines += [pad + note for note in notes(row)]
    return lines


def notes(row: OpRow) -> list[str]:
    """What the suite's cases and the matrix's known failures add to the engine call."""
    out = []
    total = sum(len(f.cases) for f in row.families)
    for fam in row.families:
        if fam.provider == row.chosen:
            continue
        shown = ", ".join(fam.cases[:3]) + (", ..." if len(fam.cases) > 3 else "")
        out.append(f"{len(fam.cases)} of {total} cases go to {fam.provider} ({fam.why}): "
                   f"{shown}")
    for known in row.known:
        entry = known.entry
        host = f", {entry.host.describe()}" if entry.host else ""
        out.append(f"known failure here for {known.provider} ({entry.action}, {known.cases} of "
                   f"{known.of} cases{host}): {signature(entry)} [{entry.where}]")
        if entry.engine_fallback:
            out.append(f"  the engine, when it happens: {entry.engine_fallback}")
    return out
