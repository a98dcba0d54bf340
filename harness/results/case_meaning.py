"""What a test case's outcome says: one answer, asked the same way by the run, the history,
the report, compare, bisect and repro.

The six outcomes (``STATUSES``, one spelling everywhere a case is read, stored or shown:
JUnit, the history, the reports) answer three questions:

=========  =====  =====  ===============================================================
status     works  known  a finding
=========  =====  =====  ===============================================================
passed     yes    no     no
xpass      yes    yes    yes: the known failure no longer holds (strict: the run fails)
failed     no     no     yes
error      no     no     yes
xfail      no     yes    no: the known failure holds, as the matrix says it does
skipped    -      -      no: nothing was judged
=========  =====  =====  ===============================================================

Who asks what:

- **bisect** asks whether the code under test works (``WORKS`` good, ``BROKEN`` bad): an
  xfail is the bug still there, an xpass the bug gone, whatever the matrix expected.
- **repro** and the run's exit ask for findings (``FINDINGS``): what a maintainer has to
  look at. The run counts the error cases apart (``TEST_FAILURES``, which
  ``outcome.failing`` and the run's table ask): the harness adds one for a crash, which
  the suite's status already says.
- **the history** (flakiness, pass rates, `harness history`), **the report's** failing
  cells and **compare** ask for new failures (``NEW_FAILURES``: broken with no known
  failure to say so); compare shows known ones (``KNOWN``) apart.
"""

from __future__ import annotations

from collections.abc import Iterable

# A test's outcome (outcome.py re-exports it beside the counts it keys).
STATUSES = ("passed", "failed", "error", "skipped", "xfail", "xpass")

WORKS = frozenset({"passed", "xpass"})
BROKEN = frozenset({"failed", "error", "xfail"})
KNOWN = frozenset({"xfail", "xpass"})  # a known failure applied (its skip is a property)
FINDINGS = frozenset({"failed", "error", "xpass"})
NEW_FAILURES = BROKEN - KNOWN  # failed, error
# The findings a suite's tests fail it for: failed, xpass (strict: pytest fails it). The
# error cases are apart: the harness adds one for a crash, which the status already says.
TEST_FAILURES = FINDINGS - {"error"}
JUDGED = WORKS | BROKEN  # every outcome but a skip

assert JUDGED | {"skipped"} == frozenset(STATUSES)


def works(status: str) -> bool | None:
    """True where the code under test worked, False where it did not, None for a skip (or
    an outcome no reader knows): nothing judged."""
    if status in WORKS:
        return True
    if status in BROKEN:
        return False
    return None


def sql(statuses: Iterable[str]) -> str:
    """An SQL ``IN`` list of ``statuses`` in ``STATUSES`` order: ``('failed', 'error')``.
    Only the known spellings, so nothing to escape."""
    chosen = set(statuses)
    if not chosen <= set(STATUSES):
        raise ValueError(f"not outcomes: {sorted(chosen - set(STATUSES))}")
    return "(" + ", ".join(f"'{s}'" for s in STATUSES if s in chosen) + ")"
