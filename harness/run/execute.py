"""The steps that run the suites: start the manifest, check the caches, start the run's
runner (local or docker, run/request.py pick_runner) and run every invocation through it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from harness.history.schema import default_db_path
from harness.platform.cache import verify
from harness.platform.gitinfo import git_info
from harness.platform.host import host_fingerprint
from harness.process.secret_names import masked as mask_env
from harness.process.secret_names import register_secrets, scrub
from harness.results.facts import ThreadsRecord
from harness.results.manifest import GitRef, MatrixRef, RunRecord
from harness.results.manifest_write import ManifestWriter, build_id, now
from harness.results.outcome import Status, SuiteOutcome
from harness.run.plan import select_suites
from harness.run.progress import Progress, folder_estimates, history_estimates
from harness.run.request import Prepared, RunContext, Started
from harness.run.threads import ThreadPlan

# Suites that read the persistent tokenizer caches (and must find them warm).
CACHE_SUITES = frozenset({"e2e"})


def begin_record(ctx: RunContext, *, threads: ThreadPlan, run_id: str) -> RunRecord:
    """What every run's manifest records from its start, whether or not suites were planned
    (a --skip-unavailable run plans none): what was asked, git, the host, the threads."""
    git = git_info(ctx.root)
    omp = os.environ.get("OMP_NUM_THREADS") if threads.user_set else threads.threads_per_worker
    return RunRecord(
        run_id=run_id,
        matrix=MatrixRef(name=ctx.matrix.name, hash=ctx.matrix.hash, file=ctx.matrix.file),
        family=ctx.matrix.family,
        emulate=ctx.request.emulate,
        runner=ctx.runner.kind,
        git=GitRef(sha=git.sha, dirty=git.dirty),
        host=host_fingerprint(lane_cpu(ctx), left_out=ctx.left_out),
        threads=ThreadsRecord.from_json(threads.as_dict() | {"omp_num_threads": omp}),
        seed=ctx.request.seed,
        shard=str(ctx.request.shard) if ctx.request.shard else None,
        command=list(ctx.request.command_line),
        repro_of=ctx.request.repro_of,
        build=build_id(os.environ),
        changed_since=ctx.request.changed_since,
        started=now(),
        requirements=environment_pins(ctx),
        pins=list(ctx.request.pins),
    )


def lane_cpu(ctx: RunContext) -> dict[str, object] | None:
    """The lane's emulated CPU as CPUID answers inside it, where the matrix has one and the
    suites run here (None: the agent's own CPU is the lane's)."""
    if ctx.matrix.cpu.emulated is None or ctx.runner.kind != "local":
        return None
    from harness.platform.cpu_emulation import facts

    return facts(ctx.matrix.cpu)


def environment_pins(ctx: RunContext) -> list[str] | None:
    """The pins the suites' environment is built from: the image's (the matrix's own) in a
    container, the matrix's environment's (its emulation's under --emulate) here; None for
    an interpreter the run did not build (--python current or a path)."""
    if ctx.runner.in_container:
        return list(ctx.matrix.python.requirements)
    if ctx.request.python != "matrix":
        return None
    return list(ctx.environment.requirements)


def open_manifest(run_dir: Path, record: RunRecord,
                  suite_env: Mapping[str, str] | None = None) -> ManifestWriter:
    """manifest.json begun in ``run_dir``, with the secrets of this process's environment
    and of the suites' (``suite_env``) masked in it from now on."""
    register_secrets(os.environ | dict(suite_env or {}))
    return ManifestWriter(run_dir, record, mask=scrub)


def start_manifest(ctx: RunContext, plan: Prepared) -> ManifestWriter:
    """The run's manifest, written as the run starts: what was asked and planned, where."""
    record = replace(begin_record(ctx, threads=plan.threads, run_id=plan.run_id),
                     python=plan.python,
                     suites_planned=[inv.suite for inv in plan.invocations],
                     env=mask_env(dict(plan.env)))
    return open_manifest(plan.run_dir, record, plan.env)


def check_caches(run: Started) -> None:
    """A cold or corrupt tokenizer cache is an infrastructure error before any suite runs."""
    matrix = run.ctx.matrix
    if not matrix.caches.tiktoken or not any(i.suite in CACHE_SUITES
                                             for i in run.plan.invocations):
        return
    verify(matrix)


def start_runner(run: Started) -> None:
    """Ready the runner before any suite: the container started (its image built or reused)
    for a docker run; the device probed, here or in the container (a contradiction is exit
    3; an emulated run has no device to probe). The workflow stops it."""
    run.ctx.runner.start(run.plan.run_dir, run.plan.invocations, env=run.plan.env,
                         manifest=run.manifest)


def record_not_applicable(run: Started) -> None:
    """The selected suites the matrix declares not applicable: an outcome with the reason
    (never a silent absence, never a suite of 0 tests)."""
    for suite in select_suites(run.ctx.matrix, run.ctx.request.suites):
        if not suite.not_applicable:
            continue
        print(f"harness: suite {suite.name}: not applicable: {suite.not_applicable}")
        outcome = SuiteOutcome(suite=suite.name, status=Status.NOT_APPLICABLE, exit_code=None,
                               duration_s=0.0, reason=suite.not_applicable)
        run.outcomes.append(outcome)
        run.manifest.add_outcome(outcome)


def execute(run: Started) -> None:
    """Every suite through the run's runner: a progress line as each starts and ends, its
    outcome in the manifest as soon as it has one."""
    progress = make_progress(run.ctx, run.plan)
    count = iter(range(len(run.plan.invocations)))

    def record(outcome: SuiteOutcome) -> None:
        # Kept first: a manifest that cannot be written (a full disk) loses no outcome.
        run.outcomes.append(outcome)
        run.manifest.add_outcome(outcome)
        progress.end(next(count), outcome.suite, outcome.status.value,
                     outcome.counts.as_dict())

    run.ctx.runner.run(on_start=lambda i, inv: progress.start(i, inv.suite), on_outcome=record)


def make_progress(ctx: RunContext, plan: Prepared) -> Progress:
    """Suite i of N with an estimate from the history (or the last run folder)."""
    lane = ctx.environment.lane
    estimates = history_estimates(default_db_path(ctx.root), lane) or folder_estimates(
        plan.run_dir.parent, ctx.request.emulate
    )
    return Progress([inv.suite for inv in plan.invocations], estimates)
