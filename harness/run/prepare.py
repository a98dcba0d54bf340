"""The steps before any suite runs: show the resolved config, check the host, choose the
threads, the run folder, the interpreter and the environment, and plan the invocations.
Each returns what it chose; run/workflow.py ``prepare`` gathers them into a ``Prepared``."""

from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path

from harness.errors import HostUnavailable
from harness.history.schema import default_db_path
from harness.platform.budget import MemoryBudget, cpu_budget, memory_budget
from harness.platform.doctor import preflight, require_device, run_checks
from harness.platform.probe import ProbeRefused
from harness.results import layout
from harness.results.writefail import make_reserve
from harness.roots import import_path
from harness.run.memory import Peak, suite_peaks
from harness.run.pins import describe as describe_pins
from harness.run.plan import PlanOptions, override_notes, plan_run, select_suites
from harness.run.request import Prepared, RunContext
from harness.run.threads import THREAD_VARS, ThreadPlan, plan_threads
from harness.run.venvs import check_pins, check_sources, interpreter
from harness.runners.invocation import Invocation
from harness.runners.suite_env import suite_env
from harness.select import dump_lane
from harness.shard.durations import DurationSet, dump, durations_for
from harness.shard.durations import load as load_durations
from harness.shard.plan import PLANS_DIR
from harness.shard.suites import LANE_PLAN, plan_lane
from harness.shard.suites import describe as describe_lane_plan


def new_run_id() -> str:
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def print_config(ctx: RunContext) -> None:
    m = ctx.matrix
    how = "emulated on the CPU" if ctx.request.emulate else m.device
    suites = ", ".join(s.name for s in select_suites(m, ctx.request.suites))
    # Short lines: nothing here should wrap in an 80-column terminal.
    print(f"harness: matrix {m.name} from {m.file} (hash {m.hash[:12]})")
    print(f"harness: {m.hardware}; {how}")
    if m.cpu.emulated:
        print(f"harness: cpu {m.cpu.describe()}")
        if ctx.left_out:
            from harness.platform.cpu_emulation import describe_left_out

            print(f"harness: {describe_left_out(ctx.left_out)}")
    print(f"harness: suites {suites}")
    print(
        f"harness: runner {ctx.runner.kind}; seed {ctx.request.seed}"
        + (f"; shard {ctx.request.shard}" if ctx.request.shard else "")
    )
    for line in describe_pins(ctx.request.pins):
        print(f"harness: {line}")


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
    # A local CPU matrix's probe (start_runner records it). Only its refusal says this host
    # is not the matrix's (what --skip-unavailable skips); a probe that could not run or be
    # read stays an infrastructure failure, as does every check below.
    try:
        ctx.runner.preflight()
    except ProbeRefused as error:
        raise HostUnavailable(
            f"{error}; to run the {ctx.matrix.name} profile on this CPU: {command} --emulate"
        ) from None
    suites = [s.name for s in select_suites(ctx.matrix, ctx.request.suites)]
    checks = run_checks(
        ctx.matrix,
        emulate=ctx.request.emulate,
        docker=ctx.runner.in_container,
        build_venv=ctx.request.python == "matrix",
        suites=suites,
        probe_cpu=False,
    )
    preflight(checks)
    if ctx.request.python == "matrix" and not ctx.runner.in_container:
        check_sources(ctx.environment)
        check_pins(ctx.environment, [p.requirement for p in ctx.request.pins])


def plan_threads_step(ctx: RunContext) -> ThreadPlan:
    """Workers and threads; a run of named tests (``--test``, repro, each bisect step) has
    no more workers than tests, so a lone test runs with the threads of the whole budget,
    as the engine runs it (a worker left idle would halve them)."""
    asked = ctx.request.workers
    named = sum(len(ids) for ids in ctx.request.tests.values())
    if asked is None and named:
        asked = named
    return plan_threads(asked, cpu_budget(), memory=memory_budget())


def recorded_peaks(ctx: RunContext) -> dict[str, Peak]:
    """Each suite's peak test memory when this lane last ran, from this host's history (with
    what a fresh worker needs for its heaviest test, where the history knows), or else the
    matrix's ``peak_memory_mb``."""
    from harness.history.read import recent_suite_peaks, recent_worker_needs

    db, lane = default_db_path(), ctx.environment.lane
    needs = {n.suite: n for n in recent_worker_needs(db, lane)}
    recorded = {}
    for p in recent_suite_peaks(db, lane):
        need = needs.get(p.suite)
        recorded[p.suite] = Peak(mb=p.mb, test=p.nodeid,
                                 fresh_mb=need.start_mb if need else None,
                                 heaviest_mb=need.heaviest_mb if need else None)
    return suite_peaks(recorded, {name: suite.peak_memory_mb
                                  for name, suite in ctx.matrix.suites.items()})


def write_test_memory(ctx: RunContext, run_dir: Path) -> Path | None:
    """Each suite's tests' memory needs, for the plugin (plugin/memory.py): every test's
    growth from this host's history, and the heaviest (else the matrix's
    ``peak_memory_mb``, a whole process's figure: more than a test's growth, never less)."""
    from harness.history.read import recent_test_growth

    if ctx.request.dry_run:
        return None
    growth: dict[str, dict[str, float]] = {}
    for row in recent_test_growth(default_db_path(), ctx.environment.lane):
        growth.setdefault(row.suite, {})[row.nodeid] = row.mb
    needs: dict[str, dict[str, object]] = {}
    for name, suite in ctx.matrix.suites.items():
        tests = growth.get(name, {})
        heaviest = max(tests.values(), default=0.0) or (suite.peak_memory_mb or 0.0)
        if heaviest:
            needs[name] = {"heaviest_mb": heaviest, "tests": tests}
    path = run_dir / layout.TEST_MEMORY
    path.write_text(json.dumps(needs, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def prepare_run_dir(ctx: RunContext) -> tuple[str, Path]:
    """The run's id and its folder, made with ``matrix.json`` in it (a dry run: named only)."""
    reports = ctx.request.reports or ctx.root / "reports"
    run_id = new_run_id()
    run_dir = layout.run_dir(reports, ctx.matrix.name, run_id).resolve()
    if ctx.request.dry_run:
        return run_id, run_dir
    for sub in (layout.JUNIT_DIR, layout.LOGS_DIR):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    (run_dir / layout.MATRIX).write_text(
        json.dumps(ctx.matrix.resolved, indent=2, sort_keys=True, default=str) + "\n"
    )
    make_reserve(run_dir)  # room to finish the run folder if the disk fills
    return run_id, run_dir


def choose_python(ctx: RunContext) -> str:
    if ctx.runner.python is not None:  # the interpreter the runner brings: the image's
        return ctx.runner.python
    # Under --emulate: the emulation's environment (a CPU torch), not the device's.
    return interpreter(ctx.request.python, ctx.matrix, emulate=ctx.request.emulate,
                       build=not ctx.request.dry_run, environment=ctx.environment)


def build_env(ctx: RunContext, threads: ThreadPlan) -> dict[str, str]:
    defaults = threads.env()
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
    return suite_env(ctx.matrix, ctx.root, import_root=import_path(ctx.environment.cache),
                     inherited_pythonpath=os.environ.get("PYTHONPATH"),
                     emulate=ctx.request.emulate, defaults=defaults,
                     overrides=ctx.request.env)


def _harness_sets_threads(ctx: RunContext, threads: ThreadPlan) -> bool:
    """Whether the thread variables are the harness's to set: not the user's (the shell,
    ``--env``), nor the matrix's ``runtime.env``, nor off (HARNESS_THREAD_BUDGET=off)."""
    given = set(ctx.matrix.runtime.env) | set(ctx.request.env)
    return bool(threads.env()) and not given & set(THREAD_VARS)


def release_step(ctx: RunContext, python: str) -> dict[str, str]:
    """Each suite whose tests are from another release than the lane's engine, and the
    run goes on with (suite -> its words); one that no one said they mean: InfraError
    (run/releases.py). A dry run asks nothing (its environment is not built)."""
    suites = [s for s in select_suites(ctx.matrix, ctx.request.suites) if s.tests_from]
    if not suites or ctx.request.dry_run:
        return {}
    from harness.run.releases import check_releases

    across = check_releases(ctx.matrix, suites, across=ctx.request.across_releases,
                            python=None if ctx.runner.in_container else python)
    for suite, words in across.items():
        print(f"harness: suite {suite}: {words}: run across releases, as asked; a module "
              "that fails to import is labelled a release mismatch")
    return across


def plan_step(ctx: RunContext, *, threads: ThreadPlan, run_dir: Path,
              python: str, across: Mapping[str, str] | None = None) -> tuple[Invocation, ...]:
    # The suites load exactly the resolved matrix this run recorded (repro relies on it).
    dry_spec = str(ctx.request.platform_file or ctx.matrix.file)
    spec = dry_spec if ctx.request.dry_run else str(run_dir / layout.MATRIX)
    durations = write_durations(ctx, run_dir)
    whole, elsewhere = lane_plan_step(ctx, run_dir, durations)
    memory = (MemoryBudget(mb=threads.memory_mb, source=threads.memory_source)
              if threads.memory_mb is not None else None)
    options = PlanOptions(
        python=python,
        platform_spec=spec,
        emulate=ctx.request.emulate,
        suites=ctx.request.suites,
        keyword=ctx.request.keyword,
        workers=threads.workers,
        workers_asked=ctx.request.workers,
        cpus=threads.cpus if _harness_sets_threads(ctx, threads) else None,
        suite_threads=ctx.request.suite_threads,
        memory=memory,
        test_memory=write_test_memory(ctx, run_dir) if memory is not None else None,
        peaks=recorded_peaks(ctx),
        seed=ctx.request.seed,
        shard=ctx.request.shard,
        durations=durations,
        plan_dir=run_dir / PLANS_DIR if ctx.request.shard else None,
        whole=whole,
        elsewhere=elsewhere,
        update_expectations=ctx.request.update_expectations,
        across_releases=across or {},
        tests=ctx.request.tests,
        extra_pytest_args=(*ctx.request.pytest_args, *write_selection(ctx, run_dir)),
    )
    for note in override_notes(ctx.matrix, options):
        print(f"harness: {note}")
    return tuple(plan_run(ctx.matrix, run_dir, ctx.root, options))


def lane_plan_step(ctx: RunContext, run_dir: Path, durations: Path | None
                   ) -> tuple[frozenset[str], frozenset[str]]:
    """For a shard of a lane of several suites: which suites it runs whole, and which
    another shard runs whole (shard/suites.py), planned from the durations file every
    shard reads; the plan in shard-plans/ beside the suites' own."""
    if durations is None or ctx.request.tests or ctx.request.shard is None:
        return frozenset(), frozenset()
    names = [s.name for s in select_suites(ctx.matrix, ctx.request.suites)
             if not s.not_applicable]
    if len(names) < 2:
        return frozenset(), frozenset()
    shard = ctx.request.shard
    plan = plan_lane(names, load_durations(durations).suites, shard.count)
    out = run_dir / PLANS_DIR / f"{layout.junit_stem(LANE_PLAN, shard)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(plan.as_dict(shard.index), indent=1) + "\n", encoding="utf-8")
    print(f"harness: {describe_lane_plan(plan, shard.index)}")
    here = {s for s, i in plan.whole.items() if i == shard.index}
    return frozenset(here), frozenset(set(plan.whole) - here)


def write_durations(ctx: RunContext, run_dir: Path) -> Path | None:
    """For a shard: this matrix's durations from the history, to balance the shards."""
    if not ctx.request.shard or ctx.request.dry_run:
        return None
    if ctx.request.durations_file:
        # One file every shard of a CI build reads (--durations), or the run's own (repro):
        # the shards plan alike only from the same numbers.
        given = ctx.request.durations_file
        found = load_durations(given)  # a bad file: one line naming it, before any suite
        path = Path(shutil.copy(given, run_dir / layout.DURATIONS))
        print(f"harness: shard {ctx.request.shard} balanced by {len(found.durations)} timed "
              f"tests from {given}")
        return path
    db = default_db_path()
    lane = ctx.environment.lane
    durations = durations_for(lane, db) if db.is_file() else DurationSet(matrix=str(lane))
    path = run_dir / layout.DURATIONS
    dump(durations, path)
    print(
        f"harness: shard {ctx.request.shard} balanced by {len(durations.durations)} timed "
        f"tests from {db if db.is_file() else 'no history (every test counts the same)'}"
    )
    return path


def write_selection(ctx: RunContext, run_dir: Path) -> tuple[str, ...]:
    """For --changed-since: this lane's selection as a file every pytest process reads."""
    if ctx.request.selection is None:
        return ()
    path = run_dir / layout.SELECTION
    if not ctx.request.dry_run:
        dump_lane(ctx.request.selection, path)
    return (f"--harness-select={path}",)


def print_plan(ctx: RunContext, plan: Prepared) -> None:
    """The commands a developer can paste: ``docker run`` lines for a docker run."""
    for inv in plan.invocations:
        print(f"[{inv.suite}] {ctx.runner.command_line(inv, plan.run_dir, plan.env)}")
