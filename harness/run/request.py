"""What ``harness run`` was asked (RunRequest, RunContext) and what its phases made: the
plan before any suite starts (Prepared), then the run under way (Started). Each phase's
record is whole when made, so the steps after it read no field that is still to be filled."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.matrix.model import Matrix
from harness.results.layout import Shard
from harness.results.manifest import PinOverride
from harness.results.manifest_write import ManifestWriter
from harness.results.outcome import SuiteOutcome
from harness.run.threads import ThreadPlan
from harness.run.venvs import Environment
from harness.runners.docker import DockerRunner
from harness.runners.invocation import Invocation
from harness.runners.local import LocalRunner
from harness.runners.runner import Runner
from harness.select.rules import LaneSelection


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
    shard: Shard | None = None
    seed: int = 0
    update_expectations: bool = False
    allow_empty: bool = False  # a suite that ran no test passes (else it is exit 1)
    # a host that is not the matrix's (no device, the probe refuses the CPU): a run folder
    # marked skipped with the probe's line, exit 0 (else exit 3)
    skip_unavailable: bool = False
    # a suite's tests from another release than the lane's engine run (run/releases.py)
    across_releases: bool = False
    command_line: tuple[str, ...] = ()
    pytest_args: tuple[str, ...] = ()  # `harness run ... -- ARGS`: after the suite's own
    # harness repro: suite -> node ids to run instead of the suite path, the recorded
    # matrix.json, environment restored from the run, its durations file, its run id.
    tests: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    platform_file: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    # suite -> its own thread count in the run being reproduced (SuiteOutcome.threads)
    suite_threads: Mapping[str, int] = field(default_factory=dict)
    durations_file: Path | None = None
    repro_of: str | None = None
    # harness run --changed-since: the commit diffed against, and this lane's selection
    # (a harness.select.LaneSelection) when only part of the lane is affected.
    changed_since: str | None = None
    selection: LaneSelection | None = None
    # harness run --pin: the matrix's pins this run overrides (already in the matrix the
    # RunContext holds: run/pins.py apply_pins), recorded in the manifest.
    pins: tuple[PinOverride, ...] = ()


@dataclass(kw_only=True)
class RunContext:
    """What the run was asked, where, for which matrix, and the one runner for it."""

    request: RunRequest
    root: Path
    matrix: Matrix
    runner: Runner = field(init=False)  # picked once, from the request and the matrix
    # The lane's environment (its pins, the cache, its folder), resolved once from the
    # matrix (with the run's --pin) and --emulate: every step reads this one.
    environment: Environment = field(init=False)

    def __post_init__(self) -> None:
        self.runner = pick_runner(self.request, self.matrix)
        self.environment = Environment.of(self.matrix, emulate=self.request.emulate)

    @functools.cached_property
    def left_out(self) -> dict[str, str]:
        """This agent's settings the suites do not inherit (a container inherits only its
        allowlist): said in the run's opening lines, recorded in the manifest (asked once)."""
        if self.runner.in_container or self.matrix.cpu.emulated is None:
            return {}
        from harness.platform.cpu_emulation import left_out

        return left_out(self.matrix, given=self.request.env)


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """What the steps before any suite made (run/workflow.py ``prepare``): the threads, the
    run folder, the interpreter, the suites' environment and the invocations."""

    threads: ThreadPlan
    run_id: str
    run_dir: Path
    python: str
    env: Mapping[str, str]
    invocations: tuple[Invocation, ...]


@dataclass(frozen=True, kw_only=True)
class Started:
    """A run under way (run/workflow.py ``start``): its context and plan, the manifest it
    writes, the checkout's untracked files before it (None: not a git checkout), and the
    suites' outcomes as they come."""

    ctx: RunContext
    plan: Prepared
    manifest: ManifestWriter
    untracked_before: frozenset[str] | None
    outcomes: list[SuiteOutcome] = field(default_factory=list)


def pick_runner(request: RunRequest, matrix: Matrix) -> Runner:
    """The container when asked (--docker) or, unasked, when the matrix's runtime says so;
    else this host. Emulation runs on this CPU: the platform's image would need its device."""
    docker = request.docker
    if docker is None:
        docker = bool(matrix.runtime.docker) and not request.emulate
    if docker:
        return DockerRunner(matrix, keep_container=request.keep_container,
                            writable_checkout=request.update_expectations)
    base_env = None  # this process's environment; on a lane with an emulated CPU, less the
    if matrix.cpu.emulated is not None:  # agent's host-tuned CPU settings
        from harness.platform.cpu_emulation import lane_environ

        base_env = lane_environ(matrix, given=request.env)
    return LocalRunner(None if request.emulate else matrix, preload=matrix.runtime.preload,
                       base_env=base_env)

