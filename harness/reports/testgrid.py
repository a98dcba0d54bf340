"""The test x platform grid of the report: which rows it keeps, in which order.

Kept: every test with a state other than passed or never-ran on some platform, and
the first rows of the whole order up to ``GRID_ROWS`` (what the page shows). A night
of 600k tests that all pass is a count, not 600k rows: per test the plain data is a
bit mask of lanes and its non-passed cells, never an object with a dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.history.window import WindowReader
from harness.reports.ids import shorten
from harness.reports.model import GRID_ROWS, MISSING, NEVER_RAN, TestRow

STATUS_RANK = {"error": 0, "failed": 1, "xpass": 2, "skipped": 3, "xfail": 4, "passed": 5}
_QUIET_RANK = 3  # a missing or never-ran cell sorts with the skipped ones


@dataclass
class _Facts:
    lanes: dict[str, int]  # lane -> its bit
    seen: dict[str, int] = field(default_factory=dict)  # key -> lanes that had it
    ran: dict[str, int] = field(default_factory=dict)  # key -> lanes whose latest had it
    # (key, lane bit) -> (status, message) of the worst non-passed case in the latest
    worst: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)


def _facts(
    db: WindowReader, window: list[int], latest: dict[int, str], lanes: list[str]
) -> _Facts:
    facts = _Facts({lane: bit for bit, lane in enumerate(lanes)})
    keys = db.test_keys()
    seen, ran, worst = facts.seen, facts.ran, facts.worst
    bits = {run: facts.lanes[lane] for run, lane in latest.items()}
    # The latest nights are read case by case below; the earlier runs only say where
    # a test ran (none to read when the window holds one night per lane).
    earlier = [run for run in window if run not in bits]
    for lane, test in db.lanes_of_tests(earlier) if earlier else ():
        key = keys[test]
        seen[key] = seen.get(key, 0) | 1 << facts.lanes[lane]
    for run, test, status, message in db.cases(bits):
        key, bit = keys[test], bits[run]
        ran[key] = ran.get(key, 0) | 1 << bit
        seen[key] = seen.get(key, 0) | 1 << bit
        if status != "passed":
            old = worst.get((key, bit))
            if old is None or STATUS_RANK[status] < STATUS_RANK[old[0]]:
                worst[(key, bit)] = (status, message or "")
    return facts


def _kept(facts: _Facts) -> tuple[list[str], int]:
    """The keys of the rows kept, in the page's order (problems first); the count of all."""
    everyone = (1 << len(facts.lanes)) - 1
    problems: dict[str, int] = {}  # key -> its best rank among non-passed cells
    for (key, _), (status, _) in facts.worst.items():
        problems[key] = min(problems.get(key, 5), STATUS_RANK[status])
    order: list[tuple[int, str]] = []
    kept: set[str] = set()
    for key, mask in facts.seen.items():
        best = problems.get(key, 5)
        ran = facts.ran.get(key, 0)
        if ran != everyone:
            best = min(best, _QUIET_RANK)
        if key in problems or ran != mask:  # a problem, or missing somewhere
            kept.add(key)
        order.append((best, key))
    order.sort()
    kept.update(key for _, key in order[:GRID_ROWS])
    return [key for _, key in order if key in kept], len(order)


def _row(facts: _Facts, key: str) -> TestRow:
    row = TestRow(key, {})
    mask, ran = facts.seen[key], facts.ran.get(key, 0)
    for lane, bit in facts.lanes.items():
        found = facts.worst.get((key, bit))
        if found is not None:
            row.cells[lane] = found[0]
            if found[1]:
                row.notes[lane] = found[1].split("\n", 1)[0][:300]
        elif ran >> bit & 1:
            row.cells[lane] = "passed"
        else:
            row.cells[lane] = MISSING if mask >> bit & 1 else NEVER_RAN
    return row


def grid_rows(
    db: WindowReader, window: list[int], latest: dict[int, str], lanes: list[str]
) -> tuple[list[TestRow], int]:
    """The rows kept (see the module) and the number of tests in the window.

    ``window``: every run in the report's window; ``latest``: each lane's latest night,
    run -> lane."""
    facts = _facts(db, window, latest, lanes)
    keys, total = _kept(facts)
    rows = [_row(facts, key) for key in keys]
    shorts = shorten(keys)
    for row in rows:
        row.short = shorts[row.key]
    return rows, total
