"""The generated CI steps retry exit 3 (infrastructure) and nothing else, run for real.

Each provider's test step is taken from the pipeline ``harness ci pipeline`` writes and its
own shell script run (GitHub: the step's ``run``, under ``bash -e`` as the runner does;
Buildkite: the step's commands as the agent runs them, ``bash -e -c``, after the upload's
``$$`` interpolation) with stand-ins first on PATH for every program it calls: ``harness``
exits with the codes a test hands it, one per ``harness run``; ``buildkite-agent``,
``python3`` and ``pip`` (the step's own set-up) succeed. GitHub's retry is the script's own
loop; Buildkite's is the agent's, so the step's ``retry.automatic`` rules decide here as the
agent applies them. Exit 1 (a test failed) and 4 (a test process crashed: a finding) must
run once; exit 3 once more.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import io
import os
import stat
import subprocess
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli import main

FAKE_AGENT = Path(__file__).resolve().parents[1] / "docker" / "ci_fakes" / "buildkite-agent"
STANDIN_HARNESS = """#!/bin/sh
echo "$*" >> "$STANDIN_LOG"
[ "$1" = run ] || exit 0
code=$(head -n 1 "$STANDIN_EXITS")
sed -i 1d "$STANDIN_EXITS"
exit "${code:-99}"
"""
STANDIN_PYTHON = """#!/bin/sh
# the step's `python3 -m venv .venv`: a venv whose activate changes nothing
if [ "$1" = -m ] && [ "$2" = venv ]; then mkdir -p "$3/bin" && : > "$3/bin/activate"; fi
"""
STANDINS = {"harness": STANDIN_HARNESS, "python3": STANDIN_PYTHON, "pip": "#!/bin/sh\n",
            "buildkite-agent": "#!/bin/sh\n"}


@pytest.fixture(scope="module")
def pipelines() -> dict[str, str]:
    """Each provider's generated pipeline, as `harness ci pipeline` prints it."""
    out = {}
    for provider in ("github", "buildkite"):
        with contextlib.redirect_stdout(io.StringIO()) as text:
            assert main(["ci", "pipeline", "--provider", provider]) == 0
        out[provider] = text.getvalue()
    return out


def _upload_interpolation() -> Callable[[str, dict[str, str]], str]:
    """What ``buildkite-agent pipeline upload`` does to the YAML ($$ -> $, $VAR from the
    upload's environment): the test agents' own stand-in (tests/docker/ci_fakes)."""
    loader = importlib.machinery.SourceFileLoader("fake_buildkite_agent", str(FAKE_AGENT))
    module = types.ModuleType(loader.name)
    loader.exec_module(module)
    return module.interpolate  # type: ignore[no-any-return]


def _sandbox(tmp_path: Path, exits: list[int]) -> dict[str, str]:
    """A job's folder and environment: the stand-ins first on PATH, the exit codes the
    stand-in harness hands out (one per ``harness run``) and its log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in STANDINS.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "exits").write_text("".join(f"{code}\n" for code in exits))
    (tmp_path / "job").mkdir()
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path),
            "STANDIN_EXITS": str(tmp_path / "exits"), "STANDIN_LOG": str(tmp_path / "log"),
            "LANE": "cpu", "ARGS": "", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
            "BUILDKITE_PIPELINE_SLUG": "harness"}


def _sh(argv: list[str], env: dict[str, str], cwd: Path) -> int:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=30, check=False).returncode


def _runs(tmp_path: Path) -> int:
    log = tmp_path / "log"
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(1 for line in lines if line.startswith("run "))


def github_step(pipelines: dict[str, str], tmp_path: Path, exits: list[int]) -> int:
    """The test job's `harness run` step, as a runner runs it; its exit status."""
    (step,) = [s for s in yaml.safe_load(pipelines["github"])["jobs"]["test"]["steps"]
               if s.get("name") == "harness run"]
    assert "${{" not in step["run"], "an expression the runner would fill in"
    env = _sandbox(tmp_path, exits)
    script = tmp_path / "step.sh"
    script.write_text(step["run"])
    return _sh(["bash", "-e", str(script)], env, tmp_path / "job")


def _retried(rule: dict[str, Any], status: int) -> bool:
    wanted = rule.get("exit_status", "*")
    return wanted == "*" or status == wanted or (isinstance(wanted, list) and status in wanted)


def buildkite_step(pipelines: dict[str, str], tmp_path: Path, exits: list[int]) -> int:
    """A cpu shard step, run by an agent: again while a ``retry.automatic`` rule matches
    its exit status and the rule's limit allows; the last exit status."""
    interpolate = _upload_interpolation()
    env = _sandbox(tmp_path, exits)
    steps = yaml.safe_load(interpolate(pipelines["buildkite"], {}))["steps"]
    step = next(s for s in steps if s.get("key", "").startswith("test-cpu"))
    rules = (step.get("retry") or {}).get("automatic") or []
    attempts = 0
    while True:
        attempts += 1
        status = _sh(["bash", "-e", "-c", "\n".join(step["commands"])], env, tmp_path / "job")
        rule = next((r for r in rules if _retried(r, status)), None)
        if status == 0 or rule is None or attempts > int(rule.get("limit", 2)):
            return status


@pytest.mark.parametrize("provider", [github_step, buildkite_step], ids=["github", "buildkite"])
@pytest.mark.parametrize(("exits", "runs", "status"), [
    ([1], 1, 1),        # a test failed: a finding, not retried
    ([4], 1, 4),        # a test process crashed: a finding, not retried
    ([3, 0], 2, 0),     # infrastructure, then a good run
    ([3, 3], 2, 3),     # infrastructure twice: one retry only
    ([3, 4], 2, 4),     # the retry found a crash: that stands
], ids=["1", "4", "3-then-0", "3-twice", "3-then-4"])
def test_the_step_retries_exit_3_only(pipelines: dict[str, str], tmp_path: Path,
                                      provider: Callable[..., int], exits: list[int],
                                      runs: int, status: int) -> None:
    assert provider(pipelines, tmp_path, exits) == status
    assert _runs(tmp_path) == runs
