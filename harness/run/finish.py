"""The steps that finish a run folder whatever happened: the torch version, merged.xml,
the summary table, and the exit code with its one line."""

from __future__ import annotations

import json
from pathlib import Path

from harness.errors import Exit, InfraError, Interrupted, TestProcessCrashed, TestsFailed
from harness.process import cancel
from harness.results import layout
from harness.results.cause import Cause, CauseRecord, exit_signal, meaning_of
from harness.results.facts import DeviceFingerprint
from harness.results.junit_read import suite_properties
from harness.results.manifest import InfraFailure
from harness.results.merge import merge_junit
from harness.results.outcome import Status, SuiteOutcome, failing
from harness.results.writefail import describe as describe_write_failure
from harness.results.writefail import is_write_failure
from harness.run.request import Started


def collect_suite_facts(run: Started) -> None:
    """What the suites recorded as suite properties, lifted into the manifest: torch's
    version (the plugin's), and the kernel library an engine loaded (``kernel_library``,
    e.g. "vllm _C_AVX2") into the device fingerprint beside the CPU flags that chose it,
    with the engine's ops the suites were offered (``engine_ops``, plugin/ops.py).
    (The fingerprint itself is already there: the probe step or the docker runner put it.)
    """
    version, libraries = None, []
    for outcome in run.outcomes:
        path = Path(outcome.junit) if outcome.junit else None
        if path is None or not path.is_file():
            continue
        props = suite_properties(path, lambda line: None) or {}
        version = version or props.get("torch_version")
        if props.get("kernel_library") and props["kernel_library"] not in libraries:
            libraries.append(props["kernel_library"])
    if version:
        run.manifest.set_torch(version)
    if libraries:
        fingerprint = run.manifest.record.device_fingerprint or DeviceFingerprint({})
        run.manifest.set_device_fingerprint(fingerprint.with_kernel_library(
            "; ".join(libraries)))
    surface = engine_ops(run.plan.run_dir / layout.JUNIT_DIR)
    if surface:
        fingerprint = run.manifest.record.device_fingerprint or DeviceFingerprint({})
        run.manifest.set_device_fingerprint(fingerprint.with_engine_ops(surface))


def engine_ops(junit_dir: Path) -> dict[str, str]:
    """The engine's ops every suite of the run was offered (plugin/ops.py), one union; a
    file that does not read is left out (the suite's record of calls stands alone)."""
    surface: dict[str, str] = {}
    for path in sorted(junit_dir.glob(f"*{layout.ENGINE_OPS_SUFFIX}")):
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(found, dict):
            surface.update({str(k): str(v) for k, v in found.items()})
    return surface


def merge_step(run: Started) -> None:
    suites = [Path(o.junit) for o in run.outcomes if Path(o.junit).is_file()]
    if suites:
        merge_junit(suites, run.plan.run_dir / layout.MERGED)


def print_table(run: Started) -> None:
    print()
    print(
        f"{'suite':<16} {'status':<12} {'passed':>7} {'failed':>7} {'error':>6} "
        f"{'skipped':>8} {'xfailed':>8} {'time':>8}  note"
    )
    for o in run.outcomes:
        c = o.counts
        print(
            f"{o.suite:<16} {o.status.value:<12} {c.passed:>7} "
            f"{c.failing:>7} {c.error:>6} "
            f"{c.skipped:>8} {c.xfailed:>8} "
            f"{o.duration_s:>7.1f}s  {o.reason}"
        )
    for o in run.outcomes:
        if o.mostly_skipped:
            reasons = "; ".join(f"{r.count}x {r.reason}" for r in o.skip_reasons)
            print(f"{o.suite}: mostly skipped; top skip reasons: {reasons}")
    print(f"run folder: {run.plan.run_dir}")


def crashed_itself(outcome: SuiteOutcome, *, gpu: bool = False) -> bool:
    """A test process that died of its own signal (os.abort(), a segfaulting kernel): a
    finding, which a retry would only repeat (the table in results/cause.py says which
    signals, and that an abort on a GPU lane is a GPU hang; SIGKILL, the out-of-memory
    killer or the agent, is not one)."""
    if outcome.status is not Status.CRASHED:
        return False
    cause = outcome.cause
    if cause is None and (name := exit_signal(outcome.exit_code)):
        cause = CauseRecord(cause=Cause.SIGNAL, signal=name, exit_code=outcome.exit_code)
    return (cause is not None and cause.cause is Cause.SIGNAL
            and meaning_of(cause, gpu=gpu).finding)


def _infra_failure(write_error: str, first: SuiteOutcome | None) -> InfraFailure | None:
    """The run's infrastructure failure in the manifest: a write the harness could not
    make, else the first suite that failed for one (or crashed)."""
    if write_error:
        return InfraFailure(kind=Status.WRITE_FAILED.value, message=write_error,
                            cause=CauseRecord(cause=Cause.WRITE_FAILED))
    if first is None:
        return None
    return InfraFailure(kind=first.status.value, suite=first.suite, message=first.reason,
                        cause=first.cause)


def finish(run: Started, write_error: str = "") -> int:
    """Exit code: 3 on infrastructure trouble (retried by CI; ``write_error``: a write of
    the run folder that failed for good); else 4 if a test process crashed (a finding,
    never retried); else 1 if a test failed or a suite ran no test (unless
    ``allow_empty``); 130 if interrupted, 143 / 129 if cancelled by SIGTERM / SIGHUP (the
    run folder is finished either way)."""
    outcomes, run_dir = run.outcomes, run.plan.run_dir
    tests_failed = any(o.status is Status.FAILED or failing(o.counts) for o in outcomes)
    empty = [o.suite for o in outcomes if o.status is Status.NO_TESTS]
    failed = tests_failed or bool(empty and not run.ctx.request.allow_empty)
    gpu = run.manifest.record.on_gpu
    crashes = [o for o in outcomes if crashed_itself(o, gpu=gpu)]
    infra = [o for o in outcomes if o.status.unfinished and o not in crashes]
    stopped = cancel.received() is not None or any(
        o.status is Status.INTERRUPTED for o in outcomes
    )
    infra_error = _infra_failure(write_error, next(iter(infra or crashes), None))
    if stopped:
        code = cancel.exit_code() or Exit.INTERRUPTED
        status = "cancelled" if cancel.is_ci_cancel() else "interrupted"
    elif write_error or infra:
        # The results are incomplete for a reason outside the tests: CI retries exit 3, so
        # it wins over a test failure in the same run (which the retry meets again).
        code, status = Exit.INFRA, "error"
    elif crashes:
        code, status = Exit.CRASHED, "crashed"
    elif failed:
        code, status = Exit.FAILED, "failed" if tests_failed else "no-tests"
    else:
        code, status = Exit.OK, "passed"
    try:
        run.manifest.finish(status=status, exit_code=code, infra_error=infra_error)
    except OSError as error:
        if not is_write_failure(error):
            raise
        infra_error = infra_error or InfraFailure(kind=Status.WRITE_FAILED.value,
                                                  message=describe_write_failure(
                                                      error, str(run.manifest.path)))
        code = code if stopped else Exit.INFRA
    if stopped:
        raise Interrupted(f"{cancel.describe()}; results so far are in {run_dir}",
                          exit_code=code)
    if code == Exit.INFRA:
        assert infra_error is not None
        where = f"{infra_error.suite}: " if infra_error.suite else ""
        raise InfraError(f"{where}{infra_error.message} (run folder {run_dir})")
    if code == Exit.CRASHED:
        first = crashes[0]
        raise TestProcessCrashed(f"{first.suite}: {first.reason}: a finding, not an "
                                 f"infrastructure failure (run folder {run_dir})")
    if failed and not tests_failed:
        raise TestsFailed(
            f"no test ran in {', '.join(empty)} (--allow-empty to accept); see {run_dir}"
        )
    if failed:
        raise TestsFailed(f"tests failed; see {run_dir}")
    return code
