"""CI agents for tests/docker/test_ci_agent.py: containers of a stock image (Debian with
python3, python3-venv and git; nothing of harness), each a long-lived agent whose home
persists between builds, and a Buildkite build runner that hands them the steps of a
pipeline as the provider's backend would.

Faked: only the provider. Each step's commands run verbatim (``bash -e -c``, the agent's
default shell) in a fresh clone of the origin repository at the build's commit, with the
provider's environment variables; artifacts, annotations and uploaded pipelines pass
through a store folder (``ci_fakes/buildkite-agent`` inside the container).
"""

from __future__ import annotations

import importlib.machinery
import itertools
import shlex
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FAKES = Path(__file__).resolve().parent / "ci_fakes"
STORE = "/ci-store"  # the provider's artifact / cache store, as seen in the container
ORIGIN = "/origin.git"  # the repository the agents clone from
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"
_jobs = itertools.count(1)


def fake_buildkite() -> Any:
    loader = importlib.machinery.SourceFileLoader("fake_buildkite_agent",
                                                  str(FAKES / "buildkite-agent"))
    module = type(importlib)("fake_buildkite_agent")
    loader.exec_module(module)
    return module


def sandbox_env() -> dict[str, str]:
    """The agent host's own setup on this sandbox (like an agent's environment hook): pip
    trusts the TLS proxy's authority and finds the local CPU torch wheel."""
    env = {"PIP_CERT": "/etc/ssl/certs/host-ca.crt", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    if Path("/opt/wheels").is_dir():
        env["PIP_FIND_LINKS"] = "/opt/wheels"
    return env


@dataclass
class Agent:
    """One agent: a fresh container of the stock image, its home kept in ``home``."""

    name: str
    image: str
    home: Path
    store: Path
    origin: Path
    container: str = ""

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.container = f"harness-ci-agent-{self.name}-{uuid.uuid4().hex[:8]}"
        mounts = [(self.home, "/root", "rw"), (self.store, STORE, "rw"),
                  (self.origin, ORIGIN, "ro"), (FAKES, "/ci-bin", "ro"),
                  (Path(HOST_CA), "/etc/ssl/certs/host-ca.crt", "ro")]
        if Path("/opt/wheels").is_dir():
            mounts.append((Path("/opt/wheels"), "/opt/wheels", "ro"))
        argv = ["docker", "run", "-d", "--rm", "--network", "host", "--name", self.container,
                "--label", "harness-ci-agent-test=1"]
        for source, target, mode in mounts:
            argv += ["-v", f"{source}:{target}:{mode}"]
        subprocess.run([*argv, self.image, "sleep", "infinity"], check=True,
                       capture_output=True, timeout=600)

    def stop(self) -> None:
        """Remove the agent's container. Under the vfs storage driver on a loaded host the
        removal (every file the agent's setup wrote) took over 120 s once: a slow removal is
        waited for, and one past 10 minutes is left to the engine, not failed on."""
        if self.container:
            try:
                subprocess.run(["docker", "rm", "-f", self.container], capture_output=True,
                               check=False, timeout=600)
            except subprocess.TimeoutExpired:
                print(f"ci agent: {self.container} still being removed after 600 s; left")

    def checkout(self, job: str, commit: str, *, depth: int = 0, branch: str = "") -> str:
        """A clean checkout for one job, as the agent makes it before the step's commands
        (``depth``: a shallow clone of ``branch``, whose tip is ``commit``)."""
        where = f"/builds/{job}"
        shallow = f" --depth {depth} --branch {branch}" if depth else ""
        script = (f"git clone -q --no-local{shallow} file://{ORIGIN} {where} && cd {where} && "
                  f"git checkout -q --detach {commit}")
        done = self.sh(script, {}, "/", timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        return where

    def sh(self, script: str, env: Mapping[str, str], cwd: str, *,
           timeout: float) -> subprocess.CompletedProcess[str]:
        argv = ["docker", "exec", "-w", cwd]
        path = "/ci-bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        for key, value in {"HOME": "/root", "PATH": path, "CI_STORE": STORE,
                           **sandbox_env(), **env}.items():
            argv += ["-e", f"{key}={value}"]
        return subprocess.run([*argv, self.container, "bash", "-e", "-c", script],
                              capture_output=True, text=True, timeout=timeout, check=False)


@dataclass
class Job:
    label: str
    key: str
    exit_status: int
    attempts: int
    output: str
    agent: str


@dataclass
class BuildkiteBuild:
    """One Buildkite build: the steps of the pipeline (and those its steps upload), run in
    order on the agents of their queue, as Buildkite's backend schedules them."""

    agents: dict[str | None, list[Agent]]  # queue -> agents (None: the default queue)
    store: Path
    commit: str
    branch: str
    env: dict[str, str] = field(default_factory=dict)  # BUILDKITE_PULL_REQUEST... and such
    build_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    jobs: list[Job] = field(default_factory=list)
    uploaded: set[Path] = field(default_factory=set)
    _turn: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def base_env(self) -> dict[str, str]:
        return {"CI": "true", "BUILDKITE": "true", "BUILDKITE_BUILD_ID": self.build_id,
                "BUILDKITE_BUILD_NUMBER": "1", "BUILDKITE_COMMIT": self.commit,
                "BUILDKITE_BRANCH": self.branch, "BUILDKITE_PIPELINE_SLUG": "harness",
                "BUILDKITE_PULL_REQUEST": "false", "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "",
                **self.env}

    def run(self, pipeline_text: str) -> list[Job]:
        doc = yaml.safe_load(fake_buildkite().interpolate(pipeline_text, self.base_env()))
        self._run_steps(doc)
        return self.jobs

    def _run_steps(self, doc: dict[str, Any]) -> None:
        """The steps in waves, as Buildkite runs them: those that need nothing of the wave
        before them together (shards in parallel, each on an agent of its queue); a
        ``wait`` holds until all before it are done (and passed, unless
        ``continue_on_failure``)."""
        assert doc.get("steps"), "a pipeline with no steps"
        env = {**self.base_env(), **{k: str(v) for k, v in (doc.get("env") or {}).items()}}
        failed, wave = False, []
        for step in [*doc["steps"], {"wait": None, "end": True}]:
            keys = {s.get("key") for s in wave}
            if "wait" in step or set(step.get("depends_on") or []) & keys:
                failed = self._wave(wave, env) or failed
                wave = []
                for upload in self._new_uploads():
                    self._run_steps(yaml.safe_load(upload.read_text()))
            if "wait" in step:
                if failed and not step.get("continue_on_failure") and not step.get("end"):
                    return
                continue
            wave.append(step)

    def _wave(self, steps: list[dict[str, Any]], env: dict[str, str]) -> bool:
        with ThreadPoolExecutor(max_workers=max(1, len(steps))) as pool:
            jobs = list(pool.map(lambda s: self._job(s, env), steps))
        self.jobs += jobs
        return any(j.exit_status != 0 and not s.get("soft_fail")
                   for j, s in zip(jobs, steps, strict=True))

    def _new_uploads(self) -> list[Path]:
        """Pipelines a step uploaded: Buildkite inserts their steps after that step."""
        folder = self.store / self.build_id / "uploads"
        found = sorted(folder.glob("*.yml")) if folder.is_dir() else []
        fresh = [p for p in found if p not in self.uploaded]
        self.uploaded.update(fresh)
        return fresh

    def _job(self, step: dict[str, Any], env: dict[str, str]) -> Job:
        for key in step.get("depends_on") or []:
            ran = [j for j in self.jobs if j.key == key]
            assert ran and ran[-1].exit_status == 0, f"{step.get('key')}: needs {key}"
        queue = (step.get("agents") or {}).get("queue")
        pool = self.agents.get(queue) or self.agents[None]
        with self._lock:
            agent = pool[next(self._turn) % len(pool)]
        commands = step.get("commands") or [step["command"]]
        limits = {r["exit_status"]: r["limit"]
                  for r in (step.get("retry") or {}).get("automatic") or []}
        attempts, output = 0, ""
        while True:
            attempts += 1
            job_id = f"job-{next(_jobs):03d}"
            where = agent.checkout(job_id, self.commit)
            job_env = {**env, **{k: str(v) for k, v in (step.get("env") or {}).items()},
                       "BUILDKITE_JOB_ID": job_id, "BUILDKITE_STEP_KEY": step.get("key", ""),
                       "BUILDKITE_LABEL": step.get("label", ""),
                       "BUILDKITE_AGENT_NAME": agent.name,
                       "BUILDKITE_BUILD_CHECKOUT_PATH": where}
            timeout = float(step.get("timeout_in_minutes", 60)) * 60
            started = time.monotonic()
            done = agent.sh("\n".join(commands), job_env, where, timeout=timeout)
            print(f"buildkite: {step.get('label')} on {agent.name}: exit {done.returncode} "
                  f"in {time.monotonic() - started:.0f} s", flush=True)
            output += done.stdout + done.stderr
            for pattern in step.get("artifact_paths") or []:  # whatever the exit status
                agent.sh(f"buildkite-agent artifact upload {shlex.quote(pattern)}",
                         job_env, where, timeout=600)
            if done.returncode == 0 or limits.get(done.returncode, 0) < attempts:
                break
        return Job(label=step.get("label", ""), key=step.get("key", ""),
                   exit_status=done.returncode, attempts=attempts, output=output,
                   agent=agent.name)
