"""The generated pipelines run as an agent runs them, for both providers.

Each provider gets two agents: fresh containers of a stock image (harness-base:bookworm
plus git: Debian with python3, python3-venv, g++ for inductor, git; nothing of harness),
each with a home that persists between builds as a long-lived agent's does (the two
providers' agents share two homes, as two machines that run both would: the matrix's
environment is built once per machine, not once per provider). Each step's
commands run verbatim in a fresh clone of an origin repository, with the provider's
variables; artifacts, annotations, uploaded pipelines and GitHub's cache and outputs pass
through a store folder (ci_agents.py, ci_github.py, ci_fakes/buildkite-agent: fakes of
the provider only; harness runs for real).

What it covers, to keep its cost down: one lane, cpu, in 2 shards, its platform suite
only (the project's branch disables the other suites and inductor's cold compile, a
matrix change a user makes the same way). Per provider: night 1 (durations from no
history, both shards, the report that starts the history), night 2 (durations from night
1's history, the report showing both nights), and a pull request from a branch behind its
target, whose lanes are selected when the build runs, against the merge base: the
target's newer change to the cpu matrix (which would select the whole lane) is not the
branch's; its own change selects one platform module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ci_agents import Agent, BuildkiteBuild
from ci_github import GithubRun
from scratch_repo import git

from harness.roots import project_root

ROOT = project_root().resolve()
IMAGE = "harness-agent:bookworm"
LANE_SUITES = """
suites:                               # the agent test's branch: the platform suite only
  platform: {k: "not inductor"}
  kernel_parity: {enabled: false}
  fusion: {enabled: false}
  e2e: {enabled: false}
"""
PR_FILE = "suites/platform/test_dtypes.py"


def _harness(repo: Path, *args: str) -> str:
    """harness as the checkout at ``repo`` has it (its code, matrices and templates)."""
    done = subprocess.run([sys.executable, "-m", "harness", *args], cwd=repo,
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(repo),
                               "HARNESS_HISTORY": str(repo / "no-history.sqlite")})
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def agent_image(client: Any) -> str:
    """The stock image plus git, built once (apt from the Debian mirror)."""
    try:
        client.images.get(IMAGE)
    except Exception:
        recipe = "FROM harness-base:bookworm\nRUN apt-get update -q && " \
                 "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends" \
                 " git && rm -rf /var/lib/apt/lists/*\n"
        subprocess.run(["docker", "build", "-q", "--network", "host", "-t", IMAGE, "-"],
                       input=recipe, text=True, check=True, capture_output=True, timeout=900)
    check = subprocess.run(["docker", "run", "--rm", IMAGE, "sh", "-c",
                            "git --version && python3 -m venv --help >/dev/null && "
                            "! command -v harness"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    return IMAGE


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A bare origin: main (A, then C: the cpu matrix edited) and a branch from A (B: one
    platform module edited), the project's working tree as A with the lane trimmed."""
    base = tmp_path_factory.mktemp("ci-agent")
    work = base / "work"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(work)], check=True)
    git(work, "config", "user.email", "agent@test")
    git(work, "config", "user.name", "agent test")
    for rel in git(ROOT, "ls-files", "-m", "-o", "--exclude-standard").splitlines():
        if (ROOT / rel).is_file():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, work / rel)
        else:
            (work / rel).unlink(missing_ok=True)
    for matrix in (work / "matrices").glob("*.yaml"):
        if matrix.name not in ("base.yaml", "cpu.yaml"):
            matrix.unlink()
    cpu = work / "matrices" / "cpu.yaml"
    cpu.write_text(cpu.read_text() + LANE_SUITES)
    git(work, "checkout", "-q", "-B", "main")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "A: one lane, its platform suite")
    a = git(work, "rev-parse", "HEAD").strip()
    git(work, "checkout", "-q", "-b", "feature")
    module = work / PR_FILE
    module.write_text(module.read_text() + "\n# B: the branch's own change\n")
    git(work, "commit", "-qam", "B: the branch edits one platform module")
    b = git(work, "rev-parse", "HEAD").strip()
    git(work, "checkout", "-q", "main")
    cpu.write_text(cpu.read_text() + "# C: the target moved on\n")
    git(work, "commit", "-qam", "C: main edits the cpu matrix after the branch left")
    c = git(work, "rev-parse", "HEAD").strip()
    bare = base / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return {"work": work, "bare": bare, "A": a, "B": b, "C": c, "base": base}


def _agents(origin: dict[str, Any], image: str, provider: str) -> list[Agent]:
    store = origin["base"] / f"store-{provider}"
    store.mkdir(exist_ok=True)
    agents = [Agent(name=f"{provider}-{n}", image=image, store=store, origin=origin["bare"],
                    home=origin["base"] / f"home-{n}") for n in (1, 2)]
    for agent in agents:
        agent.start()
    return agents


@pytest.fixture(scope="module")
def buildkite_agents(origin: dict[str, Any], agent_image: str) -> Iterator[list[Agent]]:
    agents = _agents(origin, agent_image, "buildkite")
    yield agents
    for agent in agents:
        agent.stop()


@pytest.fixture(scope="module")
def github_agents(origin: dict[str, Any], agent_image: str) -> Iterator[list[Agent]]:
    agents = _agents(origin, agent_image, "github")
    yield agents
    for agent in agents:
        agent.stop()


def _checkout_at(origin: dict[str, Any], commit: str) -> Path:
    where = origin["base"] / f"gen-{commit[:8]}"
    if not where.exists():
        subprocess.run(["git", "clone", "-q", str(origin["bare"]), str(where)], check=True)
        git(where, "checkout", "-q", "--detach", commit)
    return where


def _report(store: Path, build: str, rel: str) -> dict[str, Any]:
    found = sorted((store / build / "artifacts").glob(f"*/{rel}"))
    assert found, f"no {rel} among the build's artifacts"
    return json.loads(found[-1].read_text())


def _runs(store: Path, build: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in
            sorted((store / build / "artifacts").glob("*/reports/cpu/*/manifest.json"))]


def _failed(jobs: list[Any]) -> str:
    return "\n".join(f"{j.label}: exit {j.exit_status}\n{j.output[-3000:]}" for j in jobs
                     if j.exit_status != 0)


@pytest.mark.timeout(2700)  # three builds of fresh-agent steps; see the docstring
def test_buildkite_nightly_twice_then_a_pull_request(origin: dict[str, Any],
                                                      buildkite_agents: list[Agent]) -> None:
    first, second = buildkite_agents
    agents = {None: [first], "cpu": [first, second]}
    store = first.store
    nightly = _harness(_checkout_at(origin, origin["C"]), "ci", "pipeline", "--provider",
                       "buildkite", "--nightly")
    builds = []
    for night in (1, 2):
        build = BuildkiteBuild(agents=agents, store=store, commit=origin["C"], branch="main")
        jobs = build.run(nightly)
        assert all(j.exit_status == 0 for j in jobs), _failed(jobs)
        assert [j.key for j in jobs] == ["durations", "test-cpu-1", "test-cpu-2",
                                        "nightly-report"]
        runs = _runs(store, build.build_id)
        assert sorted(r["shard"] for r in runs) == ["1/2", "2/2"]
        assert {r["build"] for r in runs} == {build.build_id}
        durations = json.loads(next((store / build.build_id / "artifacts").glob(
            "*/.harness-cache/durations/cpu.json")).read_text())
        # night 1 plans from no history; night 2 from night 1's, kept on the report agent
        assert (len(durations["durations"]) > 0) == (night == 2)
        report = _report(store, build.build_id, "reports/nightly/report.json")
        (lane,) = [x for x in report["lanes"] if x["name"] == "cpu"]
        assert lane["runs"] == night  # a build's shards are one run; night 2 shows night 1
        notes = store / build.build_id / "annotations"
        assert "platforms ran" in (notes / "nightly.md").read_text()
        assert (notes / "cpu-1.md").is_file() and (notes / "cpu-2.md").is_file()
        assert "planned alike" in jobs[-1].output
        builds.append(build)
    history = first.home / ".local/share/harness/harness/history.sqlite"
    assert history.is_file()  # outside the checkout, which every job starts afresh

    pr = BuildkiteBuild(agents=agents, store=store, commit=origin["B"], branch="feature",
                        env={"BUILDKITE_PULL_REQUEST": "1",
                             "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main"})
    static = _harness(_checkout_at(origin, origin["B"]), "ci", "pipeline", "--provider",
                      "buildkite", "--pull-request")
    jobs = pr.run(static)
    assert all(j.exit_status == 0 for j in jobs), _failed(jobs)
    assert jobs[0].key == "select" and "test-cpu" in [j.key for j in jobs]
    (uploaded,) = sorted((store / pr.build_id / "uploads").glob("*.yml"))
    steps = yaml.safe_load(uploaded.read_text())["steps"]
    runs = [c for s in steps for c in s.get("commands", []) if c.startswith("harness run")]
    assert runs and all(f"--changed-since {origin['A']}" in r for r in runs), runs
    _only_the_branch_module(_runs(store, pr.build_id), store / pr.build_id / "artifacts")


def _only_the_branch_module(runs: list[dict[str, Any]], artifacts: Path) -> None:
    assert runs and all(r["changed_since"] for r in runs)
    ids = set()
    for junit in artifacts.rglob("junit/*.xml"):
        ids |= {c.get("classname", "") for c in ET.parse(junit).getroot().iter("testcase")}
    assert ids == {"suites.platform.test_dtypes"}, ids


@pytest.mark.timeout(2700)
def test_github_nightly_twice_then_a_pull_request(origin: dict[str, Any],
                                                   github_agents: list[Agent]) -> None:
    store = github_agents[0].store
    event = {"repository": "owner/harness", "event_name": "schedule", "ref": "refs/heads/main",
             "sha": origin["C"], "head_branch": "main", "base_ref": "", "head_ref": ""}
    nightly = _harness(_checkout_at(origin, origin["C"]), "ci", "pipeline", "--provider",
                       "github", "--nightly")
    for night in (1, 2):
        run = GithubRun(agents=github_agents, event=event)
        results = run.run(nightly)
        failed = [f"{r.job} {r.matrix}: " + "\n".join(f"{n} exit {c}\n{o[-2000:]}" for n, c, o
                                                   in r.steps if c) for r in run.runs
                  if r.result != "success"]
        assert results == {"select": "success", "images": "skipped", "test": "success",
                           "report": "success"}, failed
        tests = [r for r in run.runs if r.job == "test"]
        assert sorted(r.matrix["args"] for r in tests) == ["--shard 1/2", "--shard 2/2"]
        assert all(r.runs_on == ["ubuntu-24.04"] and r.timeout == 30 for r in tests)
        assert all("platforms ran" in r.summary for r in tests)  # each run's report.md
        report_job = next(r for r in run.runs if r.job == "report")
        assert "planned alike" in report_job.steps[-2][2]
        report = json.loads(next((store / f"gh-{run.run_id}" / "artifacts" / "nightly-report")
                                 .glob("report.json")).read_text())
        (lane,) = [x for x in report["lanes"] if x["name"] == "cpu"]
        assert lane["runs"] == night  # the cache carried night 1's history
        assert report_job.summary.strip()
        durations = json.loads((store / f"gh-{run.run_id}" / "artifacts" / "durations" /
                                "cpu.json").read_text())
        assert (len(durations["durations"]) > 0) == (night == 2)
    assert len(list((store / "gh-cache").glob("harness-history-*"))) == 2

    pr_event = {**event, "event_name": "pull_request", "ref": "refs/pull/1/merge",
                "sha": origin["B"], "head_branch": "feature", "base_ref": "main",
                "head_ref": "feature",
                "event": {"pull_request": {"head": {"repo": {"full_name": "someone/fork"}},
                                           "labels": []}}}
    workflow = _harness(_checkout_at(origin, origin["B"]), "ci", "pipeline", "--provider",
                        "github")
    run = GithubRun(agents=github_agents, event=pr_event)
    results = run.run(workflow)
    assert results["select"] == "success" and results["test"] == "success", [
        (r.job, [(n, c, o[-1500:]) for n, c, o in r.steps if c]) for r in run.runs]
    select = next(r for r in run.runs if r.job == "select")
    entries = json.loads(select.outputs["matrix"])["include"]
    assert [e["args"] for e in entries] == [f"--changed-since {origin['A']}"]
    _only_the_branch_module(
        [json.loads(p.read_text()) for p in (store / f"gh-{run.run_id}" / "artifacts")
         .glob("reports-cpu-*/*/manifest.json")], store / f"gh-{run.run_id}" / "artifacts")
