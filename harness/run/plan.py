"""Matrix x suites x shard -> concrete pytest invocations. Pure: runs nothing."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import UsageError
from harness.matrix.model import Matrix, Suite
from harness.matrix.suite_paths import suite_place
from harness.platform.budget import MemoryBudget
from harness.results import layout
from harness.results.layout import Shard
from harness.run.memory import Peak, check_fits, describe, lone_needs_xdist, workers_within
from harness.run.threads import thread_env
from harness.runners.invocation import Invocation


@dataclass(frozen=True, kw_only=True)
class PlanOptions:
    python: str
    platform_spec: str  # what --platform receives
    emulate: bool = False
    suites: Sequence[str] = ()
    keyword: str | None = None
    workers: int = 1
    workers_asked: int | None = None  # --workers as given (None: the CPU budget chose)
    memory: MemoryBudget | None = None  # the host's memory budget (platform/budget.py)
    test_memory: Path | None = None  # each suite's tests' memory needs (layout.TEST_MEMORY)
    # The CPUs the run's threads share, where the harness sets their count (None: the user,
    # the matrix or HARNESS_THREAD_BUDGET=off does): a suite that runs fewer workers than the
    # run planned gives each of them more threads.
    cpus: int | None = None
    # suite -> the threads its workers ran when the run being reproduced ran it (repro):
    # kept as recorded, whatever this machine's CPUs.
    suite_threads: Mapping[str, int] = field(default_factory=dict)
    peaks: Mapping[str, Peak] = field(default_factory=dict)  # suite -> its tests' peak
    seed: int = 0
    shard: Shard | None = None
    durations: Path | None = None  # every shard of one job must read the same file
    plan_dir: Path | None = None  # where each sharded suite writes its plan (shard-plans/)
    update_expectations: bool = False
    # suite -> why its tests are from another release than the lane's engine, where the
    # run goes on across releases (run/releases.py): the plugin labels its import errors
    across_releases: Mapping[str, str] = field(default_factory=dict)
    extra_pytest_args: Sequence[str] = ()
    # suite -> pytest node ids run instead of the suite's path (repro); never sharded.
    tests: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # The lane's plan for this shard (shard/suites.py): suites it runs whole, and suites
    # another shard runs whole (not planned here).
    whole: frozenset[str] = frozenset()
    elsewhere: frozenset[str] = frozenset()


def select_suites(matrix: Matrix, wanted: Sequence[str]) -> list[Suite]:
    available = dict(matrix.suites)
    if not wanted:
        return [s for s in available.values() if s.enabled]
    chosen = []
    for name in wanted:
        if name not in available:
            near = difflib.get_close_matches(name, list(available), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise UsageError(
                f"--suite {name}: {matrix.name} has no such suite{hint}; "
                f"it has: {', '.join(available)}"
            )
        chosen.append(available[name])
    return chosen


def override_notes(matrix: Matrix, options: PlanOptions) -> list[str]:
    """One line for each command-line value a suite's matrix entry caps or replaces."""
    notes = []
    asked = options.workers_asked
    for suite in select_suites(matrix, options.suites):
        if asked is not None and suite.workers != "auto" and int(suite.workers) < asked:
            notes.append(
                f"--workers {asked} capped to {suite.workers} for suite {suite.name} "
                f"(its matrix entry says workers: {suite.workers})"
            )
        cpu = _cpu_workers(suite, options)
        peak = options.peaks.get(suite.name)
        fit = workers_within(cpu, options.memory, peak)
        if fit < cpu and options.memory is not None and peak is not None:
            notes.append(describe(suite.name, cpu, fit, options.memory, peak))
        for flag in ("-n", "--rootdir", "--junitxml", "--platform", "--timeout"):
            given = [a for a in options.extra_pytest_args if a == flag or a.startswith(flag + "=")]
            if given:
                notes.append(
                    f"pytest argument {given[0]} for suite {suite.name} replaces the "
                    "harness's own (passed after them)"
                )
    return notes


def plan_run(matrix: Matrix, run_dir: Path, root: Path, options: PlanOptions) -> list[Invocation]:
    """One invocation per selected suite, but those the matrix declares not applicable."""
    return [plan_suite(matrix, suite, run_dir, root, options)
            for suite in select_suites(matrix, options.suites)
            if not suite.not_applicable and suite.name not in options.elsewhere]


def plan_suite(matrix: Matrix, suite: Suite, run_dir: Path, root: Path,
               options: PlanOptions) -> Invocation:
    node_ids = options.tests.get(suite.name, ())
    shard = None if node_ids or suite.name in options.whole else options.shard
    junit = run_dir / layout.junit_rel(suite.name, shard)
    partial = run_dir / layout.partial_rel(suite.name, shard)
    place = suite_place(suite, root)
    targets = [str(place.rootdir / n) for n in node_ids] or [str(place.target)]
    peak = options.peaks.get(suite.name)
    check_fits(suite.name, options.memory, peak)
    workers = workers_within(_cpu_workers(suite, options), options.memory, peak)
    threads = _own_threads(options, suite.name, workers)
    argv: list[str] = [options.python, "-m", "pytest", *targets]
    # Loads the plugin whether or not this interpreter has the entry point.
    argv += ["-p", "harness.pytest_entry"]
    argv += [
        "--platform",
        options.platform_spec,
        f"--junitxml={junit}",
        "-o",
        "junit_family=xunit2",
        "-o",
        f"junit_suite_name={suite.name}",
        "-p",
        "no:cacheprovider",
        f"--rootdir={place.rootdir}",
        f"--harness-seed={options.seed}",
        f"--harness-partial={partial}",
        f"--timeout={matrix.runtime.test_timeout_s}",
        "-q",
        "-ra",  # every skip, xfail and failure with its reason in the log
    ]
    if suite.name in options.across_releases:
        argv += [f"--harness-release-mismatch={options.across_releases[suite.name]}"]
    argv += _selection_args(suite, options, workers, shard)
    return Invocation(
        suite=suite.name,
        argv=tuple(argv),
        env={"HARNESS_TIER": suite.tier, **(thread_env(threads) if threads else {})},
        threads=threads,
        junit=junit,
        log=run_dir / layout.log_rel(suite.name, shard),
        partial=partial,
        timeout_s=float(suite.timeout_s or matrix.runtime.step_timeout_s),
        workers=max(1, workers),
        shard=shard,
        rootdir=place.rootdir,
        cwd=place.cwd,
        max_skip_ratio=float(suite.max_skip_ratio),
    )


def _own_threads(options: PlanOptions, suite: str, workers: int) -> int | None:
    """The thread count of a suite whose workers are fewer than the run planned (its matrix
    entry's ``workers: 1``, or the memory budget): the CPUs over its own workers, not over
    the run's (vLLM's per-file suites, one worker each, ran one thread on two CPUs); None:
    the run's."""
    if suite in options.suite_threads:
        return options.suite_threads[suite]
    if options.cpus is None or max(1, workers) >= options.workers:
        return None
    return max(1, options.cpus // max(1, workers))


def _cpu_workers(suite: Suite, options: PlanOptions) -> int:
    return options.workers if suite.workers == "auto" else min(int(suite.workers),
                                                               options.workers)


def _selection_args(suite: Suite, options: PlanOptions, workers: int,
                    shard: Shard | None) -> list[str]:
    """What narrows or spreads one suite's run: emulation, workers, markers, -k, the shard,
    then the suite's own pytest arguments and the run's."""
    argv = ["--emulate"] if options.emulate else []
    lone = lone_needs_xdist(options.memory, options.peaks.get(suite.name))
    if workers > 1 or lone:
        argv += ["-n", str(max(1, workers))]
        if options.memory is not None:  # the whole budget: the plugin keeps each worker's share
            argv += [f"--harness-memory-mb={options.memory.mb:.0f}"]
            if options.test_memory is not None:
                argv += [f"--harness-test-memory={options.test_memory}"]
    if suite.markers:
        argv += ["-m", suite.markers]
    keyword = " and ".join(f"({k})" for k in (suite.k, options.keyword) if k)
    if keyword:
        argv += ["-k", keyword]
    if shard:
        argv += [f"--harness-shard={shard}"]
        if options.durations:
            argv += [f"--harness-durations={options.durations}"]
        if options.plan_dir is not None:  # checked across a build's shards (ci check-shards)
            argv += [f"--harness-plan-out={options.plan_dir / layout.junit_stem(suite.name, shard)}"
                     ".json"]
    if options.update_expectations:
        argv.append("--update-expectations")
    return [*argv, *suite.pytest_args, *options.extra_pytest_args]
