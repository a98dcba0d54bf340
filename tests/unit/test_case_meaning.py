"""One answer to what a case's outcome says (harness/results/case_meaning.py), and no second
one spelled out elsewhere in harness/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.results.case_meaning import (
    BROKEN,
    FINDINGS,
    KNOWN,
    NEW_FAILURES,
    WORKS,
    sql,
    works,
)
from harness.results.outcome import STATUSES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("status", "worked", "known", "finding", "new"),
    [
        ("passed", True, False, False, False),
        ("xpass", True, True, True, False),  # the known failure no longer holds
        ("failed", False, False, True, True),
        ("error", False, False, True, True),
        ("xfail", False, True, False, False),  # the known failure holds
        ("skipped", None, False, False, False),
    ],
)
def test_the_table(status: str, worked: bool | None, known: bool, finding: bool,
                   new: bool) -> None:
    assert works(status) is worked
    assert (status in KNOWN) is known
    assert (status in FINDINGS) is finding
    assert (status in NEW_FAILURES) is new
    assert (status in WORKS) is (worked is True)
    assert (status in BROKEN) is (worked is False)


def test_every_outcome_has_an_answer() -> None:
    assert set(STATUSES) == WORKS | BROKEN | {"skipped"}
    assert works("no-such-outcome") is None


def test_sql_lists_in_one_order_and_refuses_unknown_words() -> None:
    assert sql(NEW_FAILURES) == "('failed', 'error')"
    assert sql(WORKS) == "('passed', 'xpass')"
    with pytest.raises(ValueError, match="not outcomes"):
        sql({"passed", "'; DROP TABLE cases; --"})


# Two or more outcome words together in a tuple, set or SQL list: a second answer.
_SPELLED = re.compile(
    r"""[({]\s*['"](passed|failed|error|xfail|xpass)['"]\s*,\s*['"](passed|failed|error|xfail|xpass)['"]""")


# Lines that list outcome words for another purpose, each with why.
_NOT_AN_ANSWER = {
    "harness/history/read.py": "s.status",  # a suite's Status (durations of suites that ran)
    "harness/reports/html.py": "CELL_ORDER",  # the grid's sort order, worst first
}


def test_no_module_spells_out_its_own_answer() -> None:
    own = {ROOT / "harness/results/case_meaning.py", ROOT / "harness/results/outcome.py"}
    found = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        if path in own:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            allowed = _NOT_AN_ANSWER.get(str(path.relative_to(ROOT)))
            if _SPELLED.search(line) and not (allowed and allowed in line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "ask harness/results/case_meaning.py instead:\n" + "\n".join(found)
