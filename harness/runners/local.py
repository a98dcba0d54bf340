"""Run a plan's invocations as local subprocesses, one suite after another, and turn how
each process ended plus what it wrote into its outcome (``outcome_of``, every runner's)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from harness.matrix.model import Matrix
from harness.platform.doctor import cpu_expectations
from harness.platform.probe_local import probe_and_check
from harness.process import cancel
from harness.process.run import ProcResult, run_streaming
from harness.process.secret_names import masked, scrub_file
from harness.results.cause import Cause, CauseRecord, cause_of_exit, reason_of
from harness.results.facts import DeviceFingerprint
from harness.results.junit_write import (
    append_error_case,
    write_salvaged_junit,
)
from harness.results.layout import progress_for_partial
from harness.results.manifest_write import ManifestWriter
from harness.results.outcome import Counts, Status, SuiteOutcome, failing
from harness.results.sidecar import peak_memory
from harness.results.suite_junit import read_suite
from harness.results.writefail import describe as describe_write_failure
from harness.results.writefail import is_write_failure
from harness.runners.forkserver import ForkServer
from harness.runners.invocation import Invocation
from harness.runners.runner import Runner


def _ran_nothing(code: int | None, counts: dict[str, int]) -> bool:
    """pytest's exit 5 (nothing collected or every test deselected), or a JUnit file with no
    test case: a selection that ran nothing has checked nothing. A file skipped whole while
    pytest collected it (an AMX-only file on another CPU) is a case with its reason (exit 5
    too): skipped, as the skip check says, not nothing."""
    return not sum(counts.values()) or (code == 5 and not counts.get("skipped"))


def outcome_of(inv: Invocation, result: ProcResult) -> SuiteOutcome:
    """Turn how the process ended plus what it wrote into an outcome. JUnit is the truth."""
    # a test may have printed a secret's value (or named a test after one)
    for written in (inv.junit, inv.partial, progress_for_partial(inv.partial)):
        try:
            scrub_file(written)
        except OSError as error:
            if not is_write_failure(error):
                raise
    code = result.exit_code
    ended = _ended(inv, result)
    status, cause = Status.ended(ended), _reason(inv, result, ended)
    try:
        if cause:
            stopped = status.stopped_words
            if inv.junit.is_file():
                running = append_error_case(inv.junit, inv.suite, cause, result.tail,
                                            inv.partial, stopped, ended)
            else:
                running = write_salvaged_junit(inv.junit, inv.suite, inv.partial, cause,
                                               result.tail, stopped, result.duration_s, ended)
            if running:  # the test that hung or crashed, by name
                cause = f"{cause} in {', '.join(running)}"
    except OSError as error:  # what pytest wrote stays as it was
        if not is_write_failure(error):
            raise
        status, ended = Status.WRITE_FAILED, CauseRecord(cause=Cause.WRITE_FAILED, exit_code=code)
        cause = "; ".join(filter(None, [cause, describe_write_failure(error, str(inv.junit))]))
    read = read_suite(inv.junit, inv.suite) if inv.junit.is_file() else None  # once
    counts = read.counts if read else {}
    if status is Status.PASSED and (failing(counts) or counts.get("error") or code == 1):
        status = Status.FAILED
    reason = cause
    if status is Status.PASSED and _ran_nothing(code, counts):
        status, reason = Status.NO_TESTS, "no tests ran"
    skips, peak = (read.skips, read.peak) if read else (None, peak_memory(inv.partial))
    if mostly := skips is not None and skips.mostly_skipped(inv.max_skip_ratio):
        note = (f"mostly skipped: {skips.skipped} of {skips.total} "
                f"({skips.ratio:.0%} > max_skip_ratio {inv.max_skip_ratio:g})")
        reason = f"{reason}; {note}" if reason else note
        if status is Status.PASSED:
            status = Status.MOSTLY_SKIPPED
    return SuiteOutcome(
        suite=inv.suite,
        status=status,
        exit_code=code,
        duration_s=round(result.duration_s, 3),
        reason=reason,
        junit=str(inv.junit),
        shard=str(inv.shard) if inv.shard else None,
        counts=Counts.of(counts),
        log_tail=result.tail[-10:] if cause else [],
        skip_ratio=round(skips.ratio, 4) if skips is not None else None,
        mostly_skipped=mostly,
        skip_reasons=list(skips.reasons) if skips is not None else [],
        cause=ended,
        peak_rss_mb=peak[0] if peak else None,
        peak_test=peak[1] if peak else "",
        threads=inv.threads,
    )


def _ended(inv: Invocation, result: ProcResult) -> CauseRecord | None:
    """Why the process ended as it did, before its JUnit is read (results/cause.py)."""
    return cause_of_exit(result.exit_code, timed_out=result.timed_out,
                         cancelled=result.interrupted, write_failed=bool(result.write_error),
                         junit_written=inv.junit.is_file())


def _reason(inv: Invocation, result: ProcResult, ended: CauseRecord | None) -> str:
    """Why the process ended as it did, in words (empty when it ended as pytest does): the
    cause's (results/cause.py), with what only this runner knows of a timeout, a cancel
    and a failed write."""
    if ended is None:
        return ""
    if ended.cause is Cause.WRITE_FAILED:
        return result.write_error or reason_of(ended)
    if ended.cause is Cause.CANCELLED:
        return cancel.describe()
    if ended.cause is Cause.TIMEOUT:
        return f"timeout: step ran past {inv.timeout_s:g} s and was killed"
    return reason_of(ended)


class LocalRunner(Runner):
    """The suites as subprocesses of this host, in their own process groups."""

    kind = "local"
    in_container = False

    def __init__(self, matrix: Matrix | None = None, *,
                 base_env: Mapping[str, str] | None = None,
                 echo: TextIO | None = sys.stdout, preload: Sequence[str] = ()) -> None:
        """``matrix``: the device to probe at start (None: none, as under emulation);
        ``base_env``: what every suite inherits (None: this process's environment);
        ``preload``: the modules a fork server imports once for the one-worker suites."""
        super().__init__(echo=echo)
        self.matrix = matrix
        self.base_env = base_env
        self._env: dict[str, str] = {}
        self.forkserver = ForkServer(preload)

    def preflight(self) -> None:
        """A CPU matrix that expects a vendor or flags (zen) probes in milliseconds: before
        the run's environment is built, not after (the same probe as ``harness doctor``)."""
        if self.matrix is not None and cpu_expectations(self.matrix):
            self.probe()

    def probe(self) -> DeviceFingerprint | None:
        """The matrix's device probe on this host, checked (InfraError), taken once."""
        if self.matrix is not None and self.fingerprint is None:
            self.fingerprint = probe_and_check(self.matrix)
        return self.fingerprint

    def _start(self, run_dir: Path, env: dict[str, str] | None,
               manifest: ManifestWriter | None) -> None:
        self._env = dict(os.environ if self.base_env is None else self.base_env) | (env or {})
        self.probe()

    def stop(self) -> None:
        """Each suite's process group is gone when its ``run_one`` returns; the fork
        server, if one started, goes now."""
        self.forkserver.stop()

    def run_one(self, inv: Invocation) -> SuiteOutcome:
        env = self._env | dict(inv.env)
        result = run_streaming(
            self.forkserver.argv_for(inv, env),
            env=env,
            log_path=inv.log,
            prefix=f"[{inv.suite}] ",
            timeout_s=inv.timeout_s,
            cwd=inv.cwd,
            echo=self.echo,
        )
        return outcome_of(inv, result)

    def command_line(self, inv: Invocation, run_dir: Path, env: Mapping[str, str]) -> str:
        shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(masked(dict(inv.env)).items()))
        where = f"cd {shlex.quote(str(inv.cwd))} && " if inv.cwd else ""
        return f"{where}{shown} {shlex.join(inv.argv)}"
