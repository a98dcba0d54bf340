"""Matrix x suites x shard -> concrete pytest invocations. Pure: runs nothing."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UsageError


@dataclass(frozen=True, kw_only=True)
class Invocation:
    suite: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    junit: Path
    log: Path
    partial: Path
    timeout_s: float
    workers: int
    shard: str | None = None


@dataclass(frozen=True, kw_only=True)
class PlanOptions:
    python: str
    platform_spec: str  # what --platform receives
    emulate: bool = False
    suites: Sequence[str] = ()
    keyword: str | None = None
    workers: int = 1
    seed: int = 0
    shard: str | None = None
    durations: Path | None = None  # every shard of one job must read the same file
    update_expectations: bool = False
    extra_pytest_args: Sequence[str] = ()
    # suite -> pytest node ids run instead of the suite's path (repro); never sharded.
    tests: Mapping[str, Sequence[str]] = field(default_factory=dict)


def select_suites(matrix: Any, wanted: Sequence[str]) -> list[Any]:
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


def junit_name(suite: str, shard: str | None) -> str:
    if not shard:
        return f"{suite}.xml"
    index, _, total = shard.partition("/")
    return f"{suite}-shard-{index}-of-{total}.xml"


def plan_run(matrix: Any, run_dir: Path, root: Path, options: PlanOptions) -> list[Invocation]:
    invocations = []
    for suite in select_suites(matrix, options.suites):
        node_ids = options.tests.get(suite.name, ())
        shard = None if node_ids else options.shard
        junit = run_dir / "junit" / junit_name(suite.name, shard)
        stem = junit.stem
        targets = [str(root / n) for n in node_ids] or [str(root / suite.path)]
        argv: list[str] = [options.python, "-m", "pytest", *targets]
        # Loads the plugin whether or not this interpreter has the entry point.
        argv += ["-p", "harness.pytest_entry"]
        argv += [
            "--platform",
            options.platform_spec,
            f"--junitxml={junit}",
            "-o",
            "junit_family=xunit1",
            "-o",
            f"junit_suite_name={suite.name}",
            "-p",
            "no:cacheprovider",
            f"--rootdir={root}",
            f"--harness-seed={options.seed}",
            f"--harness-partial={run_dir / 'junit' / (stem + '.partial.jsonl')}",
            f"--timeout={matrix.runtime.test_timeout_s}",
            "-q",
            "-ra",  # every skip, xfail and failure with its reason in the log
        ]
        if options.emulate:
            argv.append("--emulate")
        workers = (
            options.workers if suite.workers == "auto" else min(int(suite.workers), options.workers)
        )
        if workers > 1:
            argv += ["-n", str(workers)]
        if suite.markers:
            argv += ["-m", suite.markers]
        keyword = " and ".join(f"({k})" for k in (suite.k, options.keyword) if k)
        if keyword:
            argv += ["-k", keyword]
        if shard:
            argv += [f"--harness-shard={shard}"]
            if options.durations:
                argv += [f"--harness-durations={options.durations}"]
        if options.update_expectations:
            argv.append("--update-expectations")
        argv += list(options.extra_pytest_args)
        env = {"HARNESS_TIER": suite.tier}
        invocations.append(
            Invocation(
                suite=suite.name,
                argv=tuple(argv),
                env=env,
                junit=junit,
                log=run_dir / "logs" / f"{stem}.log",
                partial=run_dir / "junit" / f"{stem}.partial.jsonl",
                timeout_s=float(suite.timeout_s or matrix.runtime.step_timeout_s),
                workers=max(1, workers),
                shard=shard,
            )
        )
    return invocations
