"""``harness run`` as an ordered list of small steps over one RunContext."""

from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import InfraError, Interrupted, TestsFailed
from harness.history.schema import default_db_path
from harness.matrix.model import Matrix
from harness.platform.cache import cache_root, verify
from harness.platform.doctor import preflight, require_device, run_checks
from harness.platform.gitinfo import git_info
from harness.platform.host import host_fingerprint
from harness.platform.probe_local import probe_and_check
from harness.process import cancel
from harness.process.secret_names import masked as mask_env
from harness.process.secret_names import register_secrets, scrub
from harness.results import layout
from harness.results.junit_read import suite_properties
from harness.results.manifest import (
    GitRef,
    InfraFailure,
    ManifestWriter,
    MatrixRef,
    RunRecord,
    build_id,
    now,
)
from harness.results.merge import merge_junit
from harness.results.outcome import Status, SuiteOutcome, failing
from harness.results.writefail import describe as describe_write_failure
from harness.results.writefail import is_write_failure, make_reserve, release_reserve
from harness.roots import import_path
from harness.run.checks import record_new_files, report_unmatched, snapshot_checkout
from harness.run.plan import PlanOptions, override_notes, plan_run, select_suites
from harness.run.progress import Progress, folder_estimates, history_estimates
from harness.run.threads import ThreadPlan, cpu_budget, plan_threads
from harness.run.venvs import matrix_python
from harness.runners.docker import docker_command_line
from harness.runners.docker import run_invocations as run_in_docker
from harness.runners.invocation import Invocation
from harness.runners.local import run_invocations
from harness.runners.suite_env import suite_env
from harness.select import dump_lane
from harness.select.rules import LaneSelection
from harness.shard.durations import DurationSet, dump, durations_for

# Suites that read the persistent tokenizer caches (and must find them warm).
CACHE_SUITES = frozenset({"e2e"})


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    matrix: str
    suites: tuple[str, ...] = ()
    keyword: str | None = None
    emulate: bool = False
    workers: int | None = None
    reports: Path | None = None
    dry_run: bool = False
    python: str = "matrix"  # "matrix" (per-matrix venv) | "current" | a path
    docker: bool | None = None  # None: the matrix's runtime.docker decides
    keep_container: bool = False
    shard: str | None = None
    seed: int = 0
    update_expectations: bool = False
    allow_empty: bool = False  # a suite that ran no test passes (else it is exit 1)
    command_line: tuple[str, ...] = ()
    pytest_args: tuple[str, ...] = ()  # `harness run ... -- ARGS`: after the suite's own
    # harness repro: suite -> node ids to run instead of the suite path, the recorded
    # matrix.json, environment restored from the run, its durations file, its run id.
    tests: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    platform_file: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    durations_file: Path | None = None
    repro_of: str | None = None
    # harness run --changed-since: the commit diffed against, and this lane's selection
    # (a harness.select.LaneSelection) when only part of the lane is affected.
    changed_since: str | None = None
    selection: LaneSelection | None = None


@dataclass(kw_only=True)
class RunContext:
    request: RunRequest
    root: Path
    matrix: Matrix
    run_id: str = ""
    run_dir: Path = Path()
    threads: ThreadPlan | None = None
    python: str = ""
    env: dict[str, str] = field(default_factory=dict)
    invocations: list[Invocation] = field(default_factory=list)
    manifest: ManifestWriter | None = None
    outcomes: list[SuiteOutcome] = field(default_factory=list)
    untracked_before: frozenset[str] | None = None
    write_error: str = ""  # a write that failed for good (full disk, read-only)

    @property
    def use_docker(self) -> bool:
        req = self.request.docker
        if req is None:
            # Emulation runs on this CPU: the platform's image would need its device.
            return bool(self.matrix.runtime.docker) and not self.request.emulate
        return req


def new_run_id() -> str:
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def print_config(ctx: RunContext) -> None:
    m = ctx.matrix
    how = "emulated on the CPU" if ctx.request.emulate else m.device
    runner = "docker" if ctx.use_docker else "local"
    suites = ", ".join(s.name for s in select_suites(m, ctx.request.suites))
    # Short lines: nothing here should wrap in an 80-column terminal.
    print(f"harness: matrix {m.name} from {m.file} (hash {m.hash[:12]})")
    print(f"harness: {m.hardware}; {how}")
    print(f"harness: suites {suites}")
    print(
        f"harness: runner {runner}; seed {ctx.request.seed}"
        + (f"; shard {ctx.request.shard}" if ctx.request.shard else "")
    )


def prepare_run_dir(ctx: RunContext) -> None:
    reports = ctx.request.reports or ctx.root / "reports"
    ctx.run_id = new_run_id()
    ctx.run_dir = layout.run_dir(reports, ctx.matrix.name, ctx.run_id).resolve()
    if ctx.request.dry_run:
        return
    for sub in (layout.JUNIT_DIR, layout.LOGS_DIR):
        (ctx.run_dir / sub).mkdir(parents=True, exist_ok=True)
    (ctx.run_dir / layout.MATRIX).write_text(
        json.dumps(ctx.matrix.resolved, indent=2, sort_keys=True, default=str) + "\n"
    )
    make_reserve(ctx.run_dir)  # room to finish the run folder if the disk fills


def choose_python(ctx: RunContext) -> None:
    choice = ctx.request.python
    if ctx.use_docker:
        ctx.python = "python3"
    elif choice == "current":
        ctx.python = sys.executable
    elif choice == "matrix":
        # Under --emulate: the emulation's environment (a CPU torch), not the device's.
        ctx.python = str(
            matrix_python(ctx.matrix, emulate=ctx.request.emulate, build=not ctx.request.dry_run)
        )
    else:
        ctx.python = choice


def plan_threads_step(ctx: RunContext) -> None:
    ctx.threads = plan_threads(ctx.request.workers, cpu_budget())


def build_env(ctx: RunContext) -> None:
    assert ctx.threads is not None
    defaults = ctx.threads.env()
    if "TORCH_LOGS" not in os.environ:
        # torch's own logging at ERROR unless asked for (TORCH_LOGS=+dynamo etc. in the
        # shell): a failing compile otherwise buries the result in thousands of lines.
        defaults["TORCH_LOGS"] = "-all"
    if "COLUMNS" not in os.environ:
        # Output lines carry a "[suite] " prefix: keep pytest's lines inside the terminal.
        names = [s.name for s in select_suites(ctx.matrix, ctx.request.suites)] or [""]
        width = shutil.get_terminal_size((80, 24)).columns
        defaults["COLUMNS"] = str(max(40, width - 3 - max(map(len, names))))
    # The suites import harness and refengine from this checkout (or, installed, from a
    # folder holding just those two), in any interpreter.
    ctx.env = suite_env(ctx.matrix, ctx.root, import_root=import_path(cache_root(ctx.matrix)),
                        inherited_pythonpath=os.environ.get("PYTHONPATH"),
                        emulate=ctx.request.emulate, defaults=defaults,
                        overrides=ctx.request.env)


def plan_step(ctx: RunContext) -> None:
    assert ctx.threads is not None
    # The suites load exactly the resolved matrix this run recorded (repro relies on it).
    dry_spec = str(ctx.request.platform_file or ctx.matrix.file)
    spec = dry_spec if ctx.request.dry_run else str(ctx.run_dir / layout.MATRIX)
    options = PlanOptions(
        python=ctx.python,
        platform_spec=spec,
        emulate=ctx.request.emulate,
        suites=ctx.request.suites,
        keyword=ctx.request.keyword,
        workers=ctx.threads.workers,
        workers_asked=ctx.request.workers,
        seed=ctx.request.seed,
        shard=ctx.request.shard,
        durations=write_durations(ctx),
        update_expectations=ctx.request.update_expectations,
        tests=ctx.request.tests,
        extra_pytest_args=(*ctx.request.pytest_args, *write_selection(ctx)),
    )
    for note in override_notes(ctx.matrix, options):
        print(f"harness: {note}")
    ctx.invocations = plan_run(ctx.matrix, ctx.run_dir, ctx.root, options)


def write_durations(ctx: RunContext) -> Path | None:
    """For a shard: this matrix's durations from the history, to balance the shards."""
    if not ctx.request.shard or ctx.request.dry_run:
        return None
    if ctx.request.durations_file:  # a repro balances its shard as the run did
        return Path(shutil.copy(ctx.request.durations_file, ctx.run_dir / layout.DURATIONS))
    db = default_db_path()
    lane = layout.lane_name(ctx.matrix.name, ctx.request.emulate)
    durations = durations_for(lane, db) if db.is_file() else DurationSet(matrix=lane)
    path = ctx.run_dir / layout.DURATIONS
    dump(durations, path)
    print(
        f"harness: shard {ctx.request.shard} balanced by {len(durations.durations)} timed "
        f"tests from {db if db.is_file() else 'no history (every test counts the same)'}"
    )
    return path


def write_selection(ctx: RunContext) -> tuple[str, ...]:
    """For --changed-since: this lane's selection as a file every pytest process reads."""
    if ctx.request.selection is None:
        return ()
    path = ctx.run_dir / "select.json"
    if not ctx.request.dry_run:
        dump_lane(ctx.request.selection, path)
    return (f"--harness-select={path}",)


def print_plan(ctx: RunContext) -> None:
    """The commands a developer can paste: ``docker run`` lines for a docker run."""
    if ctx.use_docker:
        for inv in ctx.invocations:
            line = docker_command_line(ctx.matrix, inv, run_dir=ctx.run_dir, env=ctx.env,
                                       writable_checkout=ctx.request.update_expectations)
            print(f"[{inv.suite}] {shlex.join(line)}")
        return
    for inv in ctx.invocations:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(mask_env(dict(inv.env)).items()))
        where = f"cd {shlex.quote(str(inv.cwd))} && " if inv.cwd else ""
        print(f"[{inv.suite}] {where}{env} {shlex.join(inv.argv)}")


def start_manifest(ctx: RunContext) -> None:
    git = git_info(ctx.root)
    assert ctx.threads is not None
    threads = ctx.threads.as_dict() | {
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS")
        if ctx.threads.user_set
        else ctx.threads.threads_per_worker
    }
    record = RunRecord(
        run_id=ctx.run_id,
        matrix=MatrixRef(name=ctx.matrix.name, hash=ctx.matrix.hash, file=ctx.matrix.file),
        family=ctx.matrix.family,
        emulate=ctx.request.emulate,
        runner="docker" if ctx.use_docker else "local",
        git=GitRef(sha=git.sha, dirty=git.dirty),
        python=ctx.python,
        host=host_fingerprint(),
        threads=threads,
        seed=ctx.request.seed,
        shard=ctx.request.shard,
        suites_planned=[inv.suite for inv in ctx.invocations],
        env=mask_env(dict(ctx.env)),
        command=list(ctx.request.command_line),
        repro_of=ctx.request.repro_of,
        build=build_id(os.environ),
        changed_since=ctx.request.changed_since,
        started=now(),
    )
    register_secrets(os.environ | ctx.env)
    ctx.manifest = ManifestWriter(ctx.run_dir, record, mask=scrub)


def execute(ctx: RunContext) -> None:
    assert ctx.manifest is not None
    manifest = ctx.manifest
    if ctx.use_docker:
        ctx.outcomes = run_in_docker(
            ctx.matrix,
            ctx.invocations,
            ctx.run_dir,
            keep_container=ctx.request.keep_container,
            env=ctx.env,
            manifest=manifest,
            writable_checkout=ctx.request.update_expectations,
        )
        for outcome in ctx.outcomes:
            manifest.add_outcome(outcome)
        return
    progress = make_progress(ctx)
    count = iter(range(len(ctx.invocations)))

    def record(outcome: SuiteOutcome) -> None:
        # Kept first: a manifest that cannot be written (a full disk) loses no outcome.
        ctx.outcomes.append(outcome)
        manifest.add_outcome(outcome)
        progress.end(next(count), outcome.suite, outcome.status.value, outcome.counts)

    run_invocations(
        ctx.invocations,
        os.environ | ctx.env,
        on_outcome=record,
        on_start=lambda i, inv: progress.start(i, inv.suite),
    )


def make_progress(ctx: RunContext) -> Progress:
    """Suite i of N with an estimate from the history (or the last run folder)."""
    lane = layout.lane_name(ctx.matrix.name, ctx.request.emulate)
    estimates = history_estimates(default_db_path(ctx.root), lane) or folder_estimates(
        ctx.run_dir.parent, ctx.request.emulate
    )
    return Progress([inv.suite for inv in ctx.invocations], estimates)


def collect_torch_version(ctx: RunContext) -> None:
    """The plugin records torch's version as a suite property; lift it into the manifest.

    (The device fingerprint is already there: the probe step or the docker runner put it.)
    """
    assert ctx.manifest is not None
    for outcome in ctx.outcomes:
        path = Path(outcome.junit)
        if not path.is_file():
            continue
        version = (suite_properties(path, lambda line: None) or {}).get("torch_version")
        if version:
            ctx.manifest.update(torch=version)
            return


def merge_step(ctx: RunContext) -> None:
    files = [Path(o.junit) for o in ctx.outcomes if Path(o.junit).is_file()]
    if files:
        merge_junit(files, ctx.run_dir / layout.MERGED)


def print_table(ctx: RunContext) -> None:
    print()
    print(
        f"{'suite':<16} {'status':<12} {'passed':>7} {'failed':>7} {'error':>6} "
        f"{'skipped':>8} {'xfailed':>8} {'time':>8}  note"
    )
    for o in ctx.outcomes:
        c = o.counts
        print(
            f"{o.suite:<16} {o.status.value:<12} {c.get('passed', 0):>7} "
            f"{c.get('failed', 0) + c.get('xpassed', 0):>7} {c.get('error', 0):>6} "
            f"{c.get('skipped', 0):>8} {c.get('xfailed', 0):>8} "
            f"{o.duration_s:>7.1f}s  {o.reason}"
        )
    for o in ctx.outcomes:
        if o.mostly_skipped:
            reasons = "; ".join(f"{r['count']}x {r['reason']}" for r in o.skip_reasons)
            print(f"{o.suite}: mostly skipped; top skip reasons: {reasons}")
    print(f"run folder: {ctx.run_dir}")


def finish(ctx: RunContext) -> int:
    """Exit code: 1 if a test failed or a suite ran no test (unless ``allow_empty``), else 3
    on infrastructure trouble; 130 if interrupted, 143 / 129 if cancelled by SIGTERM /
    SIGHUP (the run folder is finished either way)."""
    assert ctx.manifest is not None
    tests_failed = any(o.status is Status.FAILED or failing(o.counts) for o in ctx.outcomes)
    empty = [o.suite for o in ctx.outcomes if o.status is Status.NO_TESTS]
    failed = tests_failed or bool(empty and not ctx.request.allow_empty)
    infra = [o for o in ctx.outcomes if o.status.is_infra]
    stopped = cancel.received() is not None or any(
        o.status is Status.INTERRUPTED for o in ctx.outcomes
    )
    infra_error = None
    if ctx.write_error:
        infra_error = InfraFailure(kind=Status.WRITE_FAILED.value, message=ctx.write_error)
    elif infra:
        first = infra[0]
        infra_error = InfraFailure(kind=first.status.value, suite=first.suite, message=first.reason)
    if stopped:
        code = cancel.exit_code() or 130
        status = "cancelled" if cancel.is_ci_cancel() else "interrupted"
    elif ctx.write_error:
        code, status = 3, "error"  # the run stopped early: its failures are not the story
    elif failed:
        code, status = 1, "failed" if tests_failed else "no-tests"
    elif infra:
        code, status = 3, "error"
    else:
        code, status = 0, "passed"
    try:
        ctx.manifest.finish(status=status, exit_code=code, infra_error=infra_error)
    except OSError as error:
        if not is_write_failure(error):
            raise
        infra_error = infra_error or InfraFailure(kind=Status.WRITE_FAILED.value,
                                                  message=describe_write_failure(
                                                      error, str(ctx.manifest.path)))
        code = code if stopped else 3
    if stopped:
        raise Interrupted(f"{cancel.describe()}; results so far are in {ctx.run_dir}",
                          exit_code=code)
    if code == 3:
        assert infra_error is not None
        where = f"{infra_error.suite}: " if infra_error.suite else ""
        raise InfraError(f"{where}{infra_error.message} (run folder {ctx.run_dir})")
    if failed and not tests_failed:
        raise TestsFailed(
            f"no test ran in {', '.join(empty)} (--allow-empty to accept); see {ctx.run_dir}"
        )
    if failed:
        raise TestsFailed(f"tests failed; see {ctx.run_dir}")
    return code


def preflight_step(ctx: RunContext) -> None:
    """Before anything is built or Docker is touched: does this host have what the run needs?

    A GPU matrix without its GPU is one line pointing at --emulate; anything else missing
    is one line each with the command that installs it (exit 3).
    """
    if ctx.request.dry_run:
        return
    command = f"harness run --matrix {ctx.request.matrix}"
    if not ctx.request.emulate:
        require_device(ctx.matrix, command=command)
    suites = [s.name for s in select_suites(ctx.matrix, ctx.request.suites)]
    checks = run_checks(
        ctx.matrix,
        emulate=ctx.request.emulate,
        docker=ctx.use_docker,
        build_venv=ctx.request.python == "matrix",
        suites=suites,
    )
    preflight(checks)
    expect = {k: v for k, v in ctx.matrix.probe.expect.items() if k != "min_devices"}
    if not ctx.request.emulate and not ctx.use_docker and ctx.matrix.probe.kind == "lscpu" \
            and expect:
        # A CPU matrix that expects a vendor or flags (zen) probes in milliseconds: before
        # its environment is built, not after.
        try:
            probe_and_check(ctx.matrix)
        except InfraError as error:
            raise InfraError(
                f"{error}; to run the {ctx.matrix.name} profile on this CPU: {command} --emulate"
            ) from None


def run_workflow(ctx: RunContext) -> int:
    print_config(ctx)
    preflight_step(ctx)
    plan_threads_step(ctx)
    prepare_run_dir(ctx)
    choose_python(ctx)
    build_env(ctx)
    plan_step(ctx)
    if ctx.request.dry_run:
        print_plan(ctx)
        return 0
    with cancel.cancel_signals():
        return _run(ctx)


def _run(ctx: RunContext) -> int:
    start_manifest(ctx)
    assert ctx.manifest is not None
    snapshot_checkout(ctx)
    try:
        check_caches(ctx)
        probe_step(ctx)
        execute(ctx)
    except KeyboardInterrupt:
        pass  # Ctrl-C, SIGTERM or SIGHUP: the runner stopped the suite; finish() reports it
    except InfraError as error:
        with cancel.shield():
            release_reserve(ctx.run_dir)
            ctx.manifest.finish(
                status="error",
                exit_code=3,
                infra_error=InfraFailure(kind="infra", message=str(error)),
            )
        raise
    except OSError as error:
        if not is_write_failure(error):
            raise
        release_reserve(ctx.run_dir)
        ctx.write_error = next(
            (o.reason for o in ctx.outcomes if o.status is Status.WRITE_FAILED), ""
        ) or describe_write_failure(error, str(ctx.run_dir))
    with cancel.shield():  # a signal now is recorded, not raised: the folder is finished first
        release_reserve(ctx.run_dir)
        ctx.write_error = ctx.write_error or next(
            (o.reason for o in ctx.outcomes if o.status is Status.WRITE_FAILED), ""
        )
        for step in (collect_torch_version, merge_step, record_new_files, print_table,
                     report_unmatched):
            try:
                step(ctx)
            except OSError as error:
                if not is_write_failure(error):
                    raise
                where = str(ctx.run_dir / layout.MERGED) if step is merge_step else ""
                ctx.write_error = ctx.write_error or describe_write_failure(error, where)
        return finish(ctx)


def probe_step(ctx: RunContext) -> None:
    """Locally, probe the device before any suite: a contradiction is exit 3.

    Emulated runs have no device to probe; the docker runner probes inside the container.
    """
    if ctx.request.emulate or ctx.use_docker:
        return
    assert ctx.manifest is not None
    fingerprint = probe_and_check(ctx.matrix)
    ctx.manifest.update(device_fingerprint=fingerprint)


def check_caches(ctx: RunContext) -> None:
    """A cold or corrupt tokenizer cache is an infrastructure error before any suite runs."""
    if not ctx.matrix.caches.tiktoken or not any(i.suite in CACHE_SUITES for i in ctx.invocations):
        return
    verify(ctx.matrix)
