"""The runner interface as ``harness run`` drives it (run/execute.py ``execute``): a progress
line as each suite starts and ends, and each outcome in the manifest before the next suite
starts. Docker runs go through the same step (tests/docker/test_run_docker.py shows their
lines); here the local runner runs tiny real processes that write JUnit themselves."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.matrix import load_matrix
from harness.platform.budget import cpu_budget
from harness.results import layout
from harness.results.manifest import MatrixRef, RunRecord
from harness.results.manifest_write import ManifestWriter
from harness.results.outcome import Status
from harness.roots import project_root
from harness.run.execute import execute
from harness.run.request import Prepared, RunContext, RunRequest, Started
from harness.run.threads import plan_threads
from harness.runners.invocation import Invocation
from harness.runners.local import LocalRunner

JUNIT = ('<testsuites><testsuite name="s" tests="1"><testcase classname="c" name="t" '
         'time="0.1"/></testsuite></testsuites>')
# What the second suite sees of the first in the manifest while it runs.
SHOW_MANIFEST = ("import json, pathlib\n"
                 "record = json.loads(pathlib.Path({manifest!r}).read_text())\n"
                 "print('recorded:', [s['suite'] for s in record['suites']])")


def invocation(run_dir: Path, suite: str, code: str = "") -> Invocation:
    junit = run_dir / layout.JUNIT_DIR / f"{suite}.xml"
    script = f"{code}\nimport pathlib; pathlib.Path({str(junit)!r}).write_text({JUNIT!r})"
    return Invocation(suite=suite, argv=(sys.executable, "-c", script), junit=junit,
                      log=run_dir / layout.LOGS_DIR / f"{suite}.log",
                      partial=junit.with_suffix(".partial.jsonl"), timeout_s=60, workers=1)


def test_execute_prints_progress_and_records_each_outcome_as_it_comes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = RunRequest(matrix="cpu", docker=False, python="current", reports=tmp_path)
    ctx = RunContext(request=request, root=project_root(), matrix=load_matrix("cpu"))
    ctx.runner = LocalRunner(echo=None)  # no device to probe
    run_dir = tmp_path / "cpu" / "run"
    run_dir.mkdir(parents=True)
    shown = SHOW_MANIFEST.format(manifest=str(run_dir / layout.MANIFEST))
    plan = Prepared(threads=plan_threads(1, cpu_budget()), run_id="run", run_dir=run_dir,
                    python=sys.executable, env={},
                    invocations=(invocation(run_dir, "first"),
                                 invocation(run_dir, "second", shown)))
    record = RunRecord(run_id="run", matrix=MatrixRef(name="cpu", hash="h", file="f"),
                       family="cpu", emulate=False, runner="local")
    run = Started(ctx=ctx, plan=plan, manifest=ManifestWriter(run_dir, record),
                  untracked_before=None)
    with ctx.runner.started(run_dir, plan.invocations, env=plan.env, manifest=run.manifest):
        execute(run)
    assert [o.status for o in run.outcomes] == [Status.PASSED, Status.PASSED]
    assert "recorded: ['first']" in plan.invocations[1].log.read_text()
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(";")[0] for line in lines if not line.startswith("harness:   ")] == [
        "harness: suite 1 of 2: first",
        "harness: suite 1 of 2 first: passed",
        "harness: suite 2 of 2: second",
        "harness: suite 2 of 2 second: passed",
    ]
    assert "so far 2 passed, 0 failed, 0 skipped" in "\n".join(lines)
    assert [s.suite for s in RunRecord.read(run_dir).suites] == ["first", "second"]


def test_a_runner_runs_only_once_started() -> None:
    with pytest.raises(RuntimeError, match="local runner runs only once started"):
        LocalRunner(echo=None).run()
