"""A :class:`~harness.reports.compare.Comparison` as Markdown (for a pull request, an
issue, a bug report upstream) or JSON (``schema`` 1: the dataclasses' fields). Text from
the run folders is quoted through ``mdescape``: test ids, messages and speed_skipped
reasons as code spans in list items, the run facts escaped in the table."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict

from harness.reports.compare import CaseChange, Comparison, KnownChange, RunSide, SpeedChange
from harness.reports.mdescape import code, text
from harness.results.case_meaning import works

SCHEMA = 1
LISTED = 50  # tests only one run has, listed in Markdown (the JSON has all)


def to_json(comparison: Comparison) -> str:
    data = {"schema": SCHEMA, **asdict(comparison), "unchanged": comparison.unchanged}
    return json.dumps(_finite(data), indent=2) + "\n"


def _finite(value: object) -> object:
    """NaN and infinities as strings: JSON has no spelling for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _facts(a: RunSide, b: RunSide) -> list[str]:
    def row(label: str, left: object, right: object) -> str:
        return f"| {label} | {text(left or '-')} | {text(right or '-')} |"

    def counts(side: RunSide) -> str:
        return ", ".join(f"{k} {v}" for k, v in side.counts.items()) or "no tests"

    return [
        "| | A | B |", "|---|---|---|",
        row("run", a.run_id, b.run_id), row("lane", a.lane, b.lane),
        row("matrix hash", a.matrix_hash[:12], b.matrix_hash[:12]),
        row("started", a.started, b.started), row("status", a.status, b.status),
        row("git", (a.git_sha or "")[:12], (b.git_sha or "")[:12]),
        row("torch", a.torch, b.torch),
        row("kernel library", a.kernel_library, b.kernel_library),
        row("CPU", a.cpu, b.cpu), row("shard", a.shard, b.shard),
        row("--pin", "; ".join(a.pins), "; ".join(b.pins)),
        row("tests", counts(a), counts(b)),
    ]


def _headline(c: Comparison) -> str:
    if c.unchanged:
        return "Nothing changed: the same outcomes, signatures, headroom and pins."
    parts = [f"{len(c.outcomes)} outcome(s) changed", f"{len(c.signatures)} signature(s)",
             f"{len(c.headroom)} headroom", f"known failures +{len(c.known_new)} "
             f"-{len(c.known_gone)}", f"{len(c.pins)} pin(s)"]
    if c.speed_compared:
        parts.append(f"speed {len(c.speed_slower)} slower, {len(c.speed_faster)} faster")
    if c.only_a or c.only_b:
        parts.append(f"{len(c.only_a)} test(s) only in A, {len(c.only_b)} only in B")
    return "; ".join(parts) + "."


def _pins(c: Comparison) -> list[str]:
    lines = ["## Pins", ""]
    missing = [name for name, side in (("A", c.a), ("B", c.b)) if side.requirements is None]
    if missing:
        lines.append(f"Not recorded for run {' and '.join(missing)}: its suites ran in an "
                     "interpreter the run did not build (`--python current` or a path), or it "
                     "was written before pins were recorded.")
    elif not c.pins:
        lines.append("The same pins in both: " + ", ".join(code(p) for p in c.a.requirements
                                                            or []) + ".")
    for pin in c.pins:
        lines.append(f"- {code(pin.name)}: {code(pin.before or 'not pinned')} -> "
                     f"{code(pin.after or 'not pinned')}")
    return [*lines, ""]


def _case_lines(changes: Iterable[CaseChange], *, signatures: bool) -> list[str]:
    out = []
    for ch in changes:
        test = code(f"{ch.suite}::{ch.nodeid}")
        if signatures:  # what differs is the signature (an xfail's message is its reason)
            out.append(f"- {test} ({ch.after}): {code(ch.before_signature)} -> "
                       f"{code(ch.after_signature)}")
            continue
        failing = ch.before_message if works(ch.after) else ch.after_message
        said = f": {code(failing)}" if failing else ""
        out.append(f"- {test}: {ch.before} -> {ch.after}{said}")
    return out


def _known_lines(title: str, known: list[KnownChange]) -> list[str]:
    lines = [f"### {title} ({len(known)})", ""]
    lines += [f"- {code(f'{k.suite}::{k.nodeid}')} ({k.status}): {code(k.reason)}"
              for k in known] or ["None."]
    return [*lines, ""]


def _section(title: str, body: list[str], count: int | None = None) -> list[str]:
    shown = len(body) if count is None else count
    return [f"## {title} ({shown})", "", *(body or ["None."]), ""]


def _listed(lines: list[str]) -> list[str]:
    """The first ``LISTED`` lines, and how many more the JSON has."""
    more = [f"- ... {len(lines) - LISTED} more (the JSON lists all)"] if len(lines) > LISTED \
        else []
    return lines[:LISTED] + more


def _speed_lines(changes: list[SpeedChange]) -> list[str]:
    return _listed([f"- {code(f'{ch.suite}::{ch.nodeid}')}: {ch.before:.4g} -> "
                    f"{ch.after:.4g} ({ch.factor:.3g}x)" for ch in changes])


def _no_speed(name: str, side: RunSide) -> list[str]:
    """Why a run that recorded no speed ratio has none, as far as its cases say."""
    if side.speed_cases:
        return []
    if not side.speed_skipped_cases:
        return [f"Run {name} recorded no speed: none of its cases has a speed ratio or says "
                "why not (a run from before the speed tier, or of suites without one).", ""]
    lines = [f"Run {name} recorded no speed: {side.speed_skipped_cases} of its cases say "
             "why not:", ""]
    return [*lines, *(f"- {code(reason)}" for reason in side.speed_skipped), ""]


def _speed(c: Comparison) -> list[str]:
    """The Speed section: slower, then faster, each by factor; none where neither run
    recorded anything of speed."""
    if not c.speed_recorded:
        return []
    lines = ["## Speed", "", f"{c.speed_compared} case(s) with a speed ratio (the engine's "
             "kernel time over the baseline's) in both runs; a change is a factor of "
             f"{c.speed_margin:g} or more either way."]
    if c.speed_one_side:
        lines.append(f"{c.speed_one_side} case(s) of both runs have a ratio in one run only "
                     "(not compared).")
    lines += ["", *_no_speed("A", c.a), *_no_speed("B", c.b)]
    for title, changes in (("Slower in B", c.speed_slower), ("Faster in B", c.speed_faster)):
        lines += [f"### {title} ({len(changes)})", "", *(_speed_lines(changes) or ["None."]),
                  ""]
    return lines


def to_markdown(c: Comparison) -> str:
    lines = [f"# {text(c.a.lane)} {text(c.a.run_id)} -> {text(c.b.lane)} {text(c.b.run_id)}",
             "", *_facts(c.a, c.b), ""]
    if not c.same_lane:
        lines += ["Two lanes are compared here: a difference may be the lane's, not a "
                  "change.", ""]
    lines += [_headline(c), "", *_pins(c)]
    lines += _section("Outcome changed", _case_lines(c.outcomes, signatures=False))
    lines += _section("Failure signature changed", _case_lines(c.signatures, signatures=True))
    lines += _section(
        f"Headroom changed by more than {c.min_change:.0%}",
        [f"- {code(f'{h.suite}::{h.nodeid}')} {code(h.name)}: {h.before:.4g} -> {h.after:.4g}"
         for h in c.headroom])
    lines += _speed(c)
    lines += ["## Known failures", ""]
    lines += _known_lines("New in B", c.known_new) + _known_lines("Gone in B", c.known_gone)
    lines += [f"### known_failures entries that match no test: +{len(c.unmatched_new)} "
              f"-{len(c.unmatched_gone)}", ""]
    unmatched = [f"- new: {code(u)}" for u in c.unmatched_new]
    unmatched += [f"- gone: {code(u)}" for u in c.unmatched_gone]
    lines += [*unmatched, ""] if unmatched else []
    for title, only in (("Only in A", c.only_a), ("Only in B", c.only_b)):
        lines += _section(title, _listed([f"- {code(key)}" for key in only]), len(only))
    return "\n".join(lines).rstrip() + "\n"
