"""Name the infrastructure failure behind a run, a suite or an error case.

A GPU hang, an OOM kill or a missing JUnit file says nothing about the code under
test, so the report keeps them apart from flaky tests. A run folder's suites and runs
record their cause as data (``results/cause.py``): :func:`label_of` names it. The
regexes below are for what carries no cause: loose JUnit from other producers, error
case messages, and run folders written before causes were recorded, where the
label comes from, in order, the manifest's ``infra_error.kind``, the suite's status
and exit code, then the text of the message.
"""

from __future__ import annotations

import re

from harness.results.cause import GPU_ABORT, Cause, CauseRecord, cause_of_exit, meaning_of

# The infra_error kinds the harness writes (run/finish.py: the first infrastructure
# suite's status; ingest: no-junit), and the suite statuses, that name a label on their
# own; the other kinds ("error", "write-failed", "infra") are named by their message
# first. A run folder without causes called a crashed run "crashed" whatever its message
# said (SIGABRT).
_NAMED = {"timeout": "timeout", "no-junit": "missing-junit", "crashed": "crashed"}
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "gpu-hang",
        re.compile(
            r"gpu hang|hang detected|exit (?:code |status )?134\b|SIGABRT|"
            r"HSA_STATUS_ERROR|Xid \d+|device lost|ring \w+ timeout",
            re.I,
        ),
    ),
    (
        "oom-kill",
        re.compile(
            r"exit (?:code |status )?137\b|SIGKILL|OOMKilled|oom[- ]kill|"
            r"Killed process",
            re.I,
        ),
    ),
    ("timeout", re.compile(r"\btimed? ?out\b|Timeout >|deadline exceeded", re.I)),
    ("missing-junit", re.compile(r"no junit|missing junit|junit .*not (?:found|written)", re.I)),
    (
        "image",
        re.compile(
            r"manifest unknown|pull access denied|image build|failed to build|"
            r"no such image|dockerfile",
            re.I,
        ),
    ),
    (
        "docker",
        re.compile(
            r"docker daemon|docker\.errors|container .*(?:exited|removed)|"
            r"cannot connect to the docker",
            re.I,
        ),
    ),
)


def from_message(message: str | None) -> str | None:
    if not message:
        return None
    for label, pattern in _PATTERNS:
        if pattern.search(message):
            return label
    return None


def label_of(cause: CauseRecord, *, gpu: bool) -> str | None:
    """The label of a recorded cause (``gpu``: the run's suites ran on a GPU); None
    for one that is no infrastructure failure of its own (cancelled, a pytest error, a
    failed write): the one table's (``results/cause.py`` meaning_of), which decides an
    abort by the lane as the run's exit code does."""
    return meaning_of(cause, gpu=gpu).label


def by_exit_code(exit_code: int | None, *, gpu: bool | None) -> tuple[bool, str | None]:
    """Whether an exit code names a signal (134, -6, 137, -9, ...), and the label the
    one table (``results/cause.py`` meaning_of) gives it: none for a crash by the test's
    own signal on a CPU lane (a finding); an abort by the lane (``gpu``; None where nothing
    says, as in a loose JUnit file from another producer: vLLM's AMD CI retries exit 134
    as a GPU hang, and so it is read)."""
    record = cause_of_exit(exit_code)
    if record is None or record.cause is not Cause.SIGNAL:
        return False, None
    if gpu is None and record.signal == "SIGABRT":
        return True, GPU_ABORT.label
    return True, meaning_of(record, gpu=bool(gpu)).label


def run_label(cause: CauseRecord, kind: str, *, gpu: bool) -> str | None:
    """A run's label from the cause of the failure that ended it: none where that is a
    finding (a crash by the test's own signal on a CPU lane: exit 4); else the table's, or
    the failure's kind where the table names none (a pytest error, a failed write)."""
    meaning = meaning_of(cause, gpu=gpu)
    return None if meaning.finding else (meaning.label or kind)


def guess_label(
    *,
    kind: str | None = None,
    status: str | None = None,
    exit_code: int | None = None,
    message: str | None = None,
    gpu: bool | None = None,
) -> str | None:
    """The infrastructure label of what records no cause, or None when this looks
    like a real test result (``gpu``: whether its run was on a GPU, None: not known)."""
    if kind:
        return _NAMED.get(kind.lower()) or from_message(message) or kind.lower()
    signal, by_code = by_exit_code(exit_code, gpu=gpu)
    if signal and status not in (None, "passed", "failed"):
        return by_code
    if status in _NAMED:
        return from_message(message) or _NAMED[status]
    if status == "error":
        return from_message(message) or ("oom-kill" if exit_code == 137 else None)
    return None
