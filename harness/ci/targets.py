"""Which matrices go into a pipeline, read from their ``ci:`` sections."""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from pathlib import Path

from harness.ci.pipeline import GITHUB_DEFAULT_RUNNER, CiTarget
from harness.errors import ConfigError, UsageError
from harness.matrix import list_matrices, load_matrix
from harness.matrix.model import Matrix

# Minutes a CI step needs beside its suites: a fresh agent's virtualenvs (the matrix's
# torch), the cache, the run folder's upload. The suites' own timeouts come on top.
SETUP_MARGIN_MINUTES = 20


def suite_minutes(matrix: Matrix) -> int:
    """The longest the enabled suites may run one after another before the harness times
    each out (``timeout_s``, else ``runtime.step_timeout_s``), in whole minutes; a suite
    declared not applicable does not run."""
    seconds = sum(s.timeout_s or matrix.runtime.step_timeout_s
                  for s in matrix.suites.values() if s.enabled and not s.not_applicable)
    return math.ceil(seconds / 60)


def timeout_minutes(matrix: Matrix) -> int:
    """The step's limit: the suites' timeouts plus the setup margin, or ``ci.timeout_minutes``
    when set; a set value shorter than that is refused (CI would cancel a hang before the
    harness times it out and keeps what finished)."""
    needed = suite_minutes(matrix) + SETUP_MARGIN_MINUTES
    given = matrix.ci.timeout_minutes
    if given is None:
        return needed
    if given < needed:
        raise ConfigError(
            f"{given} is shorter than the suites' own timeouts ({suite_minutes(matrix)} min) "
            f"plus {SETUP_MARGIN_MINUTES} min to set up: CI would cancel a hang before the "
            f"harness times it out; set {needed} or more, or null to derive it",
            file=matrix.file, key="ci.timeout_minutes")
    return given


def runner_labels(matrix: Matrix) -> tuple[str, ...]:
    """GitHub's runs-on: ``ci.runs_on``, else a self-hosted runner labelled with the queue."""
    if matrix.ci.runs_on:
        return matrix.ci.runs_on
    return ("self-hosted", matrix.ci.queue) if matrix.ci.queue else (GITHUB_DEFAULT_RUNNER,)


def target(matrix: Matrix) -> CiTarget:
    return CiTarget(matrix=matrix.name, queue=matrix.ci.queue, runs_on=runner_labels(matrix),
                    shards=matrix.ci.shards, timeout_minutes=timeout_minutes(matrix),
                    nightly=matrix.ci.nightly, soft_fail=matrix.ci.soft_fail,
                    docker=bool(matrix.runtime.docker), qemu=matrix.cpu.emulated is not None)


def targets_from_matrices(root: Path | None, wanted: Sequence[str] = (), *,
                          nightly: bool = False) -> list[CiTarget]:
    """Every concrete matrix (or the ``wanted`` ones, in that order) as CI targets.

    A nightly pipeline keeps the matrices with ``ci.nightly: true``; naming a matrix
    explicitly overrides that, since asking for it is the stronger statement.
    """
    available = list_matrices(root)
    for name in wanted:
        if name not in available:
            near = difflib.get_close_matches(name, available, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise UsageError(f"--matrices: no matrix {name!r}{hint}; "
                             f"known: {', '.join(available)}")
    targets = []
    for name in wanted or available:
        matrix = load_matrix(name, root)
        if nightly and not wanted and not matrix.ci.nightly:
            continue
        targets.append(target(matrix))
    return targets
