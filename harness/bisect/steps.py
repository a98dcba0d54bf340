"""One bisect step: ``harness run --test ID`` in a subprocess, under a pin or in a checkout,
its output in a log of the step, its verdict from its run folder."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.bisect.verdict import Step, Verdict, read_verdict
from harness.errors import Exit, UsageError
from harness.process.run import run_streaming

STEP_TIMEOUT_S = 7200.0  # an environment of several GB may be built first


@dataclass(frozen=True, kw_only=True)
class Where:
    """Where a step runs: the harness to start (``cwd``, ``env``) and the run's arguments."""

    matrix: str
    test: str
    work: Path  # the bisect's own folder: a reports folder and a log per step
    python: str = "matrix"
    cwd: Path | None = None
    env: Mapping[str, str] | None = None


def _last_error(tail: Sequence[str]) -> str:
    errors = [line for line in tail if line.startswith("harness: error:")]
    return (errors[-1] if errors else (tail[-1] if tail else "no output")).strip()


def run_step(where: Where, label: str, slug: str, extra: Sequence[str] = ()) -> Step:
    """Run the test once; exit 3 (a pin pip cannot install, a cold cache) is an unrun step
    with harness's own line, exit 2 (the test is in no suite, a bad flag) a UsageError.
    Exit 3 is unrun even where the run folder holds the test, failed: the run stopped for a
    reason outside the code under test (a timeout, an out-of-memory kill, an image that
    could not be pulled), and a failure it caused is no verdict on the engine."""
    reports = where.work / slug
    argv = [sys.executable, "-m", "harness", "run", "--matrix", where.matrix, "--test",
            where.test, "--reports", str(reports), "--python", where.python, *extra]
    env = dict(os.environ if where.env is None else where.env)
    earlier = set(reports.glob("*/*/manifest.json"))  # a step run again under its slug
    result = run_streaming(argv, env=env, log_path=where.work / f"{slug}.log", prefix="",
                           timeout_s=STEP_TIMEOUT_S, cwd=where.cwd, echo=None)
    if result.exit_code == Exit.USAGE:
        raise UsageError(f"{label}: {_last_error(result.tail).removeprefix('harness: error: ')}")
    runs = sorted(set(reports.glob("*/*/manifest.json")) - earlier)
    if result.exit_code == Exit.INFRA or not runs:
        why = _last_error(result.tail).removeprefix("harness: error: ")
        return Step(label=label, verdict=Verdict.UNRUN,
                    status=f"could not run (exit {result.exit_code}): {why}", infra=True)
    return read_verdict(label, runs[-1].parent, where.test)
