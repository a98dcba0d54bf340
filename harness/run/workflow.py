"""``harness run`` as ordered lists of small steps over one RunContext (as nox does).

Each step is a function ``step(ctx) -> None`` that reads what earlier steps decided and
records what it decides; the lists below are the whole pipeline, in order.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.errors import HostUnavailable, InfraError
from harness.process import cancel
from harness.results import layout
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
)
from harness.run.request import RunContext
from harness.run.unavailable import record_skipped

Step = Callable[[RunContext], None]

# Before any suite: nothing here starts a suite; a --dry-run stops after these.
PREPARE: tuple[Step, ...] = (print_config, preflight_step, plan_threads_step, prepare_run_dir,
                             choose_python, build_env, plan_step)
# The run folder's record starts; nothing to finish if one of these fails.
START: tuple[Step, ...] = (start_manifest, snapshot_checkout)
# The suites run: Ctrl-C or a cancel stops them, an InfraError ends the run (exit 3); the
# runner is stopped (its container removed) when they end, whatever happened.
RUN: tuple[Step, ...] = (check_caches, start_runner, record_not_applicable, execute)
# With signals held back: the run folder is finished whatever happened above.
FINISH: tuple[Step, ...] = (collect_suite_facts, merge_step, record_new_files, print_table,
                            report_unmatched)


def run_workflow(ctx: RunContext) -> int:
    try:
        for step in PREPARE:
            step(ctx)
    except HostUnavailable as error:
        if not ctx.request.skip_unavailable or ctx.request.dry_run:
            raise
        return record_skipped(ctx, str(error))
    if ctx.request.dry_run:
        print_plan(ctx)
        return 0
    with cancel.cancel_signals():
        for step in START:
            step(ctx)
        _run_suites(ctx)
        with cancel.shield():  # a signal now is recorded, not raised: the folder comes first
            _finish_folder(ctx)
            return finish(ctx)


def _run_suites(ctx: RunContext) -> None:
    assert ctx.manifest is not None
    try:
        try:
            for step in RUN:
                step(ctx)
        finally:
            ctx.runner.stop()
    except KeyboardInterrupt:
        pass  # Ctrl-C, SIGTERM or SIGHUP: the runner stopped the suite; finish() reports it
    except InfraError as error:
        with cancel.shield():
            release_reserve(ctx.run_dir)
            ctx.manifest.finish(status="error", exit_code=3,
                                infra_error=InfraFailure(kind="infra", message=str(error)))
        raise
    except OSError as error:
        if not is_write_failure(error):
            raise
        release_reserve(ctx.run_dir)
        ctx.write_error = _write_failed(ctx) or describe_write_failure(error, str(ctx.run_dir))


def _finish_folder(ctx: RunContext) -> None:
    """Every FINISH step runs; a write that fails for good is remembered, not raised."""
    release_reserve(ctx.run_dir)
    ctx.write_error = ctx.write_error or _write_failed(ctx)
    for step in FINISH:
        try:
            step(ctx)
        except OSError as error:
            if not is_write_failure(error):
                raise
            where = str(ctx.run_dir / layout.MERGED) if step is merge_step else ""
            ctx.write_error = ctx.write_error or describe_write_failure(error, where)


def _write_failed(ctx: RunContext) -> str:
    return next((o.reason for o in ctx.outcomes if o.status is Status.WRITE_FAILED), "")
