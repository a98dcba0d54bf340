"""The steps of ``harness run``, in-process, with their exact output and exit codes.

The end-to-end path (real suites, real run folders) is tests/integration/test_cli_run.py;
here each step is called on its own over what the steps before it made (a RunContext, a
Prepared plan, a Started run).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from harness.errors import InfraError, TestProcessCrashed, TestsFailed
from harness.matrix import load_matrix
from harness.results import layout
from harness.results.layout import Shard
from harness.results.manifest import MatrixRef, RunRecord
from harness.results.manifest_write import ManifestWriter
from harness.results.outcome import Counts, Status, SuiteOutcome
from harness.roots import project_root
from harness.run import workflow
from harness.run.finish import finish
from harness.run.prepare import plan_threads_step, prepare_run_dir, print_config, print_plan
from harness.run.request import Prepared, RunContext, RunRequest, Started


def context(tmp_path: Path, **request: object) -> RunContext:
    asked = {"matrix": "cpu", "suites": ("platform",), "python": "current", "docker": False,
             "reports": tmp_path} | request
    return RunContext(request=RunRequest(**asked), root=project_root(),  # type: ignore[arg-type]
                      matrix=load_matrix("cpu"))


def test_print_config_says_what_will_run(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    ctx = context(tmp_path, seed=7, shard=Shard.parse("2/3"))
    print_config(ctx)
    m = ctx.matrix
    assert capsys.readouterr().out.splitlines() == [
        f"harness: matrix cpu from {m.file} (hash {m.hash[:12]})",
        f"harness: {m.hardware}; {m.device}",
        "harness: suites platform",
        "harness: runner local; seed 7; shard 2/3",
    ]


def test_a_dry_run_runs_the_steps_before_any_suite_and_prints_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctx = context(tmp_path, dry_run=True)
    assert workflow.run_workflow(ctx) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("[platform] ") and "-m pytest" in lines[-1]
    assert not tmp_path.joinpath("cpu").exists()  # a dry run writes nothing


def test_prepare_returns_the_plan_that_a_dry_run_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctx = context(tmp_path, dry_run=True)
    run_id, run_dir = prepare_run_dir(ctx)
    plan = workflow.prepare(ctx, threads=plan_threads_step(ctx), run_id=run_id,
                            run_dir=run_dir)
    (inv,) = plan.invocations
    assert inv.junit == run_dir / layout.JUNIT_DIR / "platform.xml"
    assert plan.env["PYTHONDONTWRITEBYTECODE"] == "1" and plan.python == sys.executable
    print_plan(ctx, plan)
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("[platform] ") and line.endswith(shlex.join(inv.argv))
    assert not run_dir.exists()


def _finished(tmp_path: Path, outcomes: list[SuiteOutcome], **request: object) -> Started:
    ctx = context(tmp_path, **request)
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    plan = Prepared(threads=plan_threads_step(ctx), run_id="r", run_dir=run_dir,
                    python=sys.executable, env={}, invocations=())
    record = RunRecord(run_id="r", matrix=MatrixRef(name="cpu", hash="h", file="f"),
                       family="cpu", emulate=False, runner="local")
    run = Started(ctx=ctx, plan=plan, manifest=ManifestWriter(run_dir, record),
                  untracked_before=None)
    for outcome in outcomes:
        run.outcomes.append(outcome)
        run.manifest.add_outcome(outcome)
    return run


def _outcome(status: Status, **counts: int) -> SuiteOutcome:
    return SuiteOutcome(suite="platform", status=status, exit_code=0, duration_s=1.0,
                        reason="step ran past 5 s" if status is Status.TIMEOUT else "",
                        counts=Counts.of(counts))


def _recorded(run: Started) -> tuple[str, int | None]:
    record = RunRecord.read(run.plan.run_dir)
    return record.status, record.exit_code


def test_finish_passes_a_passing_run(tmp_path: Path) -> None:
    run = _finished(tmp_path, [_outcome(Status.PASSED, passed=3)])
    assert finish(run) == 0
    assert _recorded(run) == ("passed", 0)


def test_finish_fails_on_a_failed_test_with_one_line(tmp_path: Path) -> None:
    run = _finished(tmp_path, [_outcome(Status.FAILED, passed=2, failed=1)])
    with pytest.raises(TestsFailed) as raised:
        finish(run)
    assert str(raised.value) == f"tests failed; see {run.plan.run_dir}"
    assert _recorded(run) == ("failed", 1)


def test_finish_fails_a_suite_that_ran_nothing_unless_allowed(tmp_path: Path) -> None:
    run = _finished(tmp_path, [_outcome(Status.NO_TESTS)])
    with pytest.raises(TestsFailed) as raised:
        finish(run)
    assert str(raised.value) == (
        f"no test ran in platform (--allow-empty to accept); see {run.plan.run_dir}"
    )
    assert _recorded(run) == ("no-tests", 1)
    allowed = _finished(tmp_path / "allowed", [_outcome(Status.NO_TESTS)], allow_empty=True)
    assert finish(allowed) == 0


def test_finish_names_the_suite_of_an_infrastructure_failure(tmp_path: Path) -> None:
    run = _finished(tmp_path, [_outcome(Status.TIMEOUT, passed=1)])
    with pytest.raises(InfraError) as raised:
        finish(run)
    assert str(raised.value) == f"platform: step ran past 5 s (run folder {run.plan.run_dir})"
    assert _recorded(run) == ("error", 3)
    assert (run.plan.run_dir / layout.MANIFEST).is_file()


def _crash(code: int, suite: str = "e2e") -> SuiteOutcome:
    return SuiteOutcome(suite=suite, status=Status.CRASHED, exit_code=code, duration_s=1.0,
                        reason=f"crashed: exit {code}", counts=Counts(passed=1))


@pytest.mark.parametrize("code", [134, 139, -6, -11, 135, -4])
def test_a_test_process_that_crashed_itself_is_exit_4_not_infra(tmp_path: Path,
                                                               code: int) -> None:
    # os.abort(), a segfaulting kernel: a finding; retrying it (exit 3) would repeat it.
    run = _finished(tmp_path, [_outcome(Status.FAILED, passed=1, failed=1), _crash(code)])
    with pytest.raises(TestProcessCrashed) as raised:
        finish(run)
    assert raised.value.exit_code == 4
    assert str(raised.value).startswith(f"e2e: crashed: exit {code}: a finding")
    assert _recorded(run) == ("crashed", 4)


@pytest.mark.parametrize("code", [137, -9])
def test_a_process_killed_from_outside_is_infrastructure(tmp_path: Path, code: int) -> None:
    # SIGKILL: the out-of-memory killer or the agent, not the code under test
    run = _finished(tmp_path, [_crash(code)])
    with pytest.raises(InfraError):
        finish(run)
    assert _recorded(run) == ("error", 3)


def test_infrastructure_wins_over_a_failure_and_a_crash(tmp_path: Path) -> None:
    # CI retries exit 3 only: an infra fault beside a failed test must still be retried.
    run = _finished(tmp_path, [_outcome(Status.FAILED, passed=1, failed=1), _crash(139),
                               _outcome(Status.TIMEOUT, passed=1)])
    with pytest.raises(InfraError):
        finish(run)
    assert _recorded(run) == ("error", 3)


def test_the_run_and_finish_steps_are_the_declared_lists_in_order() -> None:
    names = [[s.__name__ for s in steps] for steps in (workflow.RUN, workflow.FINISH)]
    assert names == [
        ["check_caches", "start_runner", "record_not_applicable", "execute"],
        ["collect_suite_facts", "merge_step", "record_new_files", "print_table",
         "report_unmatched"],
    ]
