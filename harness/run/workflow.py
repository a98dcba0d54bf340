"""``harness run`` as small steps in order (as nox does): each step returns what it makes,
and the workflow hands that on, so no step reads a field that is still to be filled.

Before any suite: the config shown, the host checked, the threads and the run folder
chosen, then ``prepare`` makes the plan (``Prepared``); a --dry-run stops there. ``start``
begins the run folder's record (``Started``). The suites run through the ``RUN`` steps and
the folder is finished by the ``FINISH`` steps: ``step(run: Started) -> None``, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.errors import HostUnavailable, InfraError
from harness.process import cancel
from harness.results import layout
from harness.results.cause import Cause, CauseRecord
from harness.results.manifest import InfraFailure
from harness.results.outcome import Status
from harness.results.writefail import describe as describe_write_failure
from harness.results.writefail import is_write_failure, release_reserve
from harness.run.checks import record_new_files, report_unmatched, snapshot_checkout
from harness.run.execute import (
    check_caches,
    execute,
    record_not_applicable,
    start_manifest,
    start_runner,
)
from harness.run.finish import collect_suite_facts, finish, merge_step, print_table
from harness.run.prepare import (
    build_env,
    choose_python,
    plan_step,
    plan_threads_step,
    preflight_step,
    prepare_run_dir,
    print_config,
    print_plan,
    release_step,
)
from harness.run.request import Prepared, RunContext, Started
from harness.run.threads import ThreadPlan
from harness.run.unavailable import record_skipped

Step = Callable[[Started], None]

# The suites run: Ctrl-C or a cancel stops them, an InfraError ends the run (exit 3); the
# runner is stopped (its container removed) when they end, whatever happened.
RUN: tuple[Step, ...] = (check_caches, start_runner, record_not_applicable, execute)
# With signals held back: the run folder is finished whatever happened above.
FINISH: tuple[Step, ...] = (collect_suite_facts, merge_step, record_new_files, print_table,
                            report_unmatched)


def run_workflow(ctx: RunContext, *, report: Callable[[Path], None] | None = None) -> int:
    """The run's exit code (or its error); ``report(run_dir)`` last, whatever happened,
    once the run has a folder (a dry run has none)."""
    unavailable = check_host(ctx)
    threads = plan_threads_step(ctx)
    run_id, run_dir = prepare_run_dir(ctx)
    try:
        if unavailable is not None:
            return record_skipped(ctx, unavailable, threads=threads, run_id=run_id,
                                  run_dir=run_dir)
        plan = prepare(ctx, threads=threads, run_id=run_id, run_dir=run_dir)
        if ctx.request.dry_run:
            print_plan(ctx, plan)
            return 0
        return _run(ctx, plan)
    finally:
        if report is not None and not ctx.request.dry_run:
            report(run_dir)


def check_host(ctx: RunContext) -> str | None:
    """The resolved config shown and the host checked: None, or (--skip-unavailable) why
    this host cannot run the matrix."""
    print_config(ctx)
    try:
        preflight_step(ctx)
    except HostUnavailable as error:
        if not ctx.request.skip_unavailable or ctx.request.dry_run:
            raise
        return str(error)
    return None


def prepare(ctx: RunContext, *, threads: ThreadPlan, run_id: str, run_dir: Path) -> Prepared:
    """The plan in the chosen run folder: the interpreter, the suites' environment and the
    invocations. Nothing here starts a suite."""
    python = choose_python(ctx)
    across = release_step(ctx, python)
    env = build_env(ctx, threads)
    invocations = plan_step(ctx, threads=threads, run_dir=run_dir, python=python,
                            across=across)
    return Prepared(threads=threads, run_id=run_id, run_dir=run_dir, python=python, env=env,
                    invocations=invocations)


def start(ctx: RunContext, plan: Prepared) -> Started:
    """The run folder's record starts (nothing to finish if this fails): the manifest, and
    the checkout's untracked files to compare with after the suites."""
    manifest = start_manifest(ctx, plan)
    return Started(ctx=ctx, plan=plan, manifest=manifest,
                   untracked_before=snapshot_checkout(ctx))


def _run(ctx: RunContext, plan: Prepared) -> int:
    with cancel.cancel_signals():
        run = start(ctx, plan)
        write_error = _run_suites(run)
        with cancel.shield():  # a signal now is recorded, not raised: the folder comes first
            write_error = _finish_folder(run, write_error)
            return finish(run, write_error)


def _run_suites(run: Started) -> str:
    """The RUN steps; a write of the run folder that failed for good ("" if none)."""
    run_dir = run.plan.run_dir
    try:
        try:
            for step in RUN:
                step(run)
        finally:
            run.ctx.runner.stop()
    except KeyboardInterrupt:
        pass  # Ctrl-C, SIGTERM or SIGHUP: the runner stopped the suite; finish() reports it
    except InfraError as error:
        with cancel.shield():
            release_reserve(run_dir)
            run.manifest.finish(status="error", exit_code=error.exit_code,
                                infra_error=InfraFailure(kind="infra", message=str(error),
                                                          cause=CauseRecord(
                                                              cause=Cause.INFRA_REFUSAL)))
        raise
    except OSError as error:
        if not is_write_failure(error):
            raise
        release_reserve(run_dir)
        return _write_failed(run) or describe_write_failure(error, str(run_dir))
    return ""


def _finish_folder(run: Started, write_error: str) -> str:
    """Every FINISH step runs; a write that fails for good is remembered (and returned, the
    first one), not raised."""
    release_reserve(run.plan.run_dir)
    write_error = write_error or _write_failed(run)
    for step in FINISH:
        try:
            step(run)
        except OSError as error:
            if not is_write_failure(error):
                raise
            where = str(run.plan.run_dir / layout.MERGED) if step is merge_step else ""
            write_error = write_error or describe_write_failure(error, where)
    return write_error


def _write_failed(run: Started) -> str:
    return next((o.reason for o in run.outcomes if o.status is Status.WRITE_FAILED), "")
