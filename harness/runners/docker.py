"""Run a plan's invocations inside the platform's container (``DockerRunner``).

The image is built or reused by content hash, the device is probed inside the
container, then each invocation runs with ``exec`` in one long-lived container (vfs
and similar drivers copy the whole image per container, so one per run, not per
suite). The checkout is mounted read-only at its own path, the run folder and the
caches read-write at theirs, so every path in an invocation means the same inside and
out. JUnit on the bind mount is the result, not the exit code: a crash, a hang, an OOM
kill or a container killed from outside keeps what was written and adds an error case.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from harness.errors import InfraError
from harness.platform import images, probe
from harness.process.run import TAIL_LINES, LineSink, ProcResult
from harness.process.secret_names import masked
from harness.results import layout
from harness.results.cause import Cause, CauseRecord
from harness.results.facts import DeviceFingerprint
from harness.results.outcome import SuiteOutcome
from harness.results.writefail import QuietClose
from harness.roots import project_root
from harness.runners.container import Container, reap_orphans
from harness.runners.docker_spec import (
    Spec,
    build_spec,
    cli_args,
    container_env,
    sdk_options,
    suite_mounts,
)
from harness.runners.local import outcome_of
from harness.runners.runner import Runner
from harness.runners.suite_env import suite_env

if TYPE_CHECKING:
    import docker

    from harness.matrix.model import Matrix
    from harness.results.manifest_write import ManifestWriter
    from harness.runners.invocation import Invocation


def _root() -> Path:
    return project_root().resolve()


def default_env(matrix: Matrix, root: Path) -> dict[str, str]:
    """The harness's own settings when the caller passes none: the checkout, mounted at
    its own path, is what the container imports harness from."""
    return suite_env(matrix, root, import_root=root)


def docker_command_line(matrix: Matrix, invocation: Invocation, *, run_dir: Path,
                        image: str | None = None, root: Path | None = None,
                        env: Mapping[str, str] | None = None,
                        host_env: Mapping[str, str] | None = None,
                        cache_root: Path | None = None,
                        writable_checkout: bool = False) -> list[str]:
    """The equivalent bare ``docker run`` of one invocation, for --dry-run and repro."""
    root = root or _root()
    if image is None:
        image = images.recipe(matrix, root, None).tag
    spec = build_spec(matrix, root, run_dir, cache_root=cache_root,
                      extra_mounts=suite_mounts([invocation]),
                      writable_checkout=writable_checkout)
    full_env = container_env(matrix, dict(env if env is not None else default_env(matrix, root))
                             | dict(invocation.env), os.environ if host_env is None else host_env)
    if invocation.cwd:
        spec = dataclasses.replace(spec, workdir=str(invocation.cwd))
    return ["docker", "run", "--rm", "--name", f"harness-{matrix.name}-{invocation.suite}",
            *cli_args(spec, full_env), image, *invocation.argv]


class DockerRunner(Runner):
    """The suites with ``exec`` in one long-lived container of the platform's image; the
    defaults are ``harness run``'s."""

    kind = "docker"
    in_container = True
    python = "python3"  # the image's

    def __init__(self, matrix: Matrix, *, keep_container: bool = False,
                 root: Path | None = None,  # None: the project root
                 client: docker.DockerClient | None = None,
                 image: str | None = None,  # None: build (or reuse) the matrix's image
                 run_id: str | None = None,  # None: the run folder's name
                 cache_root: Path | None = None, writable_checkout: bool = False,
                 echo: TextIO | None = sys.stdout) -> None:
        super().__init__(echo=echo)
        self.matrix, self.keep_container, self.root = matrix, keep_container, root
        self.client, self.image, self.run_id = client, image, run_id
        self.cache_root, self.writable_checkout = cache_root, writable_checkout
        self._boxes = contextlib.ExitStack()
        self._box: Container | None = None
        self._base_env: dict[str, str] = {}
        self._user = ""
        self._options: dict[str, Any] = {}

    def preflight(self) -> None:
        """The device is probed in the container, once it runs (``start``)."""

    def _start(self, run_dir: Path, env: dict[str, str] | None,
               manifest: ManifestWriter | None) -> None:
        if self._box is not None:
            return
        run_dir = run_dir.resolve()
        with contextlib.ExitStack() as scope:
            out = self.echo or scope.enter_context(open(os.devnull, "w"))
            spec = self._prepare(run_dir, env, manifest, out)
        self._user, self._options = spec.user, sdk_options(spec)
        with contextlib.ExitStack() as boxes:  # removed again if the probe fails
            self._box = boxes.enter_context(self._new_box())
            self.fingerprint = _probe(self._box, self.matrix, self._user)
            if self.fingerprint is not None:
                (run_dir / layout.FINGERPRINT).write_text(
                    json.dumps(self.fingerprint.to_json(), indent=2))
            self._boxes = boxes.pop_all()

    def _prepare(self, run_dir: Path, env: dict[str, str] | None,
                 manifest: ManifestWriter | None, out: TextIO) -> Spec:
        """The image (built or reused), the container's spec and environment; orphans of
        dead harness runs removed."""
        matrix, root = self.matrix, self.root or _root()
        client = self.client = self.client or images.engine()
        if self.image is None:
            rcp, _ = images.build(matrix, root, log_path=run_dir / layout.LOGS_DIR / "image.log",
                                  out=out, client=client)
            self.image = rcp.tag
        spec = build_spec(matrix, root, run_dir, cache_root=self.cache_root,
                          extra_mounts=suite_mounts(self.invocations),
                          writable_checkout=self.writable_checkout)
        for mount in spec.mounts:
            if not mount.read_only:
                Path(mount.source).mkdir(parents=True, exist_ok=True)  # else docker: root's
        self._base_env = container_env(matrix, env if env is not None
                                       else default_env(matrix, root), os.environ)
        if manifest is not None:
            manifest.set_container(image=self.image, env=masked(self._base_env))
        self.run_id = self.run_id or run_dir.name
        for name in reap_orphans(client):
            out.write(f"harness: removed container {name}: the harness run that owned it is "
                      "gone\n")
        return spec

    def _new_box(self) -> Container:
        assert self.client is not None and self.image is not None and self.run_id is not None
        return Container(self.client, image=self.image, run_id=self.run_id,
                         options=self._options, keep=self.keep_container)

    def stop(self) -> None:
        self._box = None
        self._boxes.close()

    def run_one(self, inv: Invocation) -> SuiteOutcome:
        if self._box is None:
            raise InfraError("docker: the runner was not started")
        if not self._box.alive():  # killed from outside, or by a timeout: a fresh one
            self._boxes.close()
            self._box = self._boxes.enter_context(self._new_box())
        return run_one(self._box, inv, self._base_env, self._user, self.echo)

    def command_line(self, inv: Invocation, run_dir: Path, env: Mapping[str, str]) -> str:
        return shlex.join(docker_command_line(self.matrix, inv, run_dir=run_dir, env=env,
                                              image=self.image, root=self.root,
                                              cache_root=self.cache_root,
                                              writable_checkout=self.writable_checkout))


def _probe(box: Container, matrix: Matrix, user: str) -> DeviceFingerprint | None:
    """The device probe inside the container; a probe that cannot run is only recorded
    when the matrix expects no device."""
    if matrix.probe.kind in ("none", "", None):
        return None

    def run_in_box(argv: list[str]) -> tuple[int, str]:
        code, text = box.run_quick(argv, user=user)
        if code == 0:
            return 0, text
        return code or 1, text.strip().splitlines()[-1] if text.strip() else f"exit {code}"

    try:
        return probe.probe(matrix.probe.kind, matrix.probe.expect, run_in_box)
    except probe.ProbeFailed as failed:
        last = str(failed).removeprefix(f"probe {matrix.probe.kind}: ")
        if int(matrix.probe.expect.get("min_devices", 0) or 0) == 0:
            return DeviceFingerprint({"kind": matrix.probe.kind, "error": last})
        raise InfraError(f"probe: {matrix.probe.kind} failed in the container: {last}") from None


def _oom_kills(box: Container) -> int | None:
    """The container's OOM-kill counter (cgroup v2, else v1); None where unreadable."""
    try:
        _, text = box.run_quick(["sh", "-c", "cat /sys/fs/cgroup/memory.events "
                                    "/sys/fs/cgroup/memory/memory.oom_control 2>/dev/null"])
    except Exception:
        return None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "oom_kill" and parts[1].isdigit():
            return int(parts[1])
    return None


def run_one(box: Container, inv: Invocation, base_env: Mapping[str, str], user: str,
            out: TextIO | None) -> SuiteOutcome:
    inv.junit.parent.mkdir(parents=True, exist_ok=True)
    inv.log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(base_env) | dict(inv.env)
    argv = list(inv.argv)
    # The counter is read only where a limit is set: each read is one more exec.
    ooms_before = _oom_kills(box) if box.options.get("mem_limit") else None
    with QuietClose(inv.log.open("a", encoding="utf-8", buffering=1)) as log:
        shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(masked(env).items()))
        log.write(f"$ docker exec {box.name} env {shown} {shlex.join(argv)}\n")
        log.flush()
        # Never raises: the reader thread must keep draining the exec's output.
        sink = LineSink(log, inv.log, out, f"[{inv.suite}] ",
                        collections.deque(maxlen=TAIL_LINES))
        workdir = str(inv.cwd or box.options.get("working_dir", "/"))
        result = box.exec(argv, env=env, workdir=workdir,
                          user=user, on_line=sink.line, timeout_s=inv.timeout_s,
                          stop_requested=lambda: bool(sink.error))
        code, notes, seen = container_notes(box, inv, result, ooms_before)
        for note in notes:
            sink.line(note)
    outcome = outcome_of(inv, dataclasses.replace(result, exit_code=code, write_error=sink.error,
                                                  tail=list(sink.tail)))
    outcome.cause = seen or outcome.cause
    extra = [n.removeprefix("harness: ") for n in notes if "step timeout" not in n]
    if extra:
        outcome.reason = "; ".join([outcome.reason, *extra]) if outcome.reason else "; ".join(extra)
    return outcome


def container_notes(box: Container, inv: Invocation, result: ProcResult,
                    ooms_before: int | None
                    ) -> tuple[int | None, list[str], CauseRecord | None]:
    """What the container tells beyond the exec's exit code: the code to classify (a
    container killed from outside leaves none), the lines that say why it ended (the
    log's, and but for the timeout's the outcome's reason too) and the cause the exit code
    hides (a container gone, the out-of-memory killer)."""
    code = result.exit_code
    notes = []
    seen: CauseRecord | None = None
    died = box.died(code)
    if result.timed_out:
        notes.append(f"harness: killed after {inv.timeout_s:g} s (step timeout)")
    if died and not (result.timed_out or result.interrupted):
        state = box.state()
        code = code if code is not None else int(state.get("ExitCode") or 137)
        notes.append(f"harness: the container was killed from outside "
                     f"(container exit {state.get('ExitCode', '?')})")
        seen = CauseRecord(cause=Cause.CONTAINER_GONE, exit_code=code)
    elif code == 137 and ooms_before is not None:
        after = _oom_kills(box)
        if after is not None and after > ooms_before:
            notes.append("harness: killed by the out-of-memory killer "
                         f"(mem_limit {box.options.get('mem_limit', 'none')})")
            seen = CauseRecord(cause=Cause.OOM, signal="SIGKILL", exit_code=code)
    return code, notes, seen
