"""Run a plan's invocations inside the platform's container.

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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from harness.errors import InfraError
from harness.matrix import repo_root
from harness.platform import images, probe
from harness.process.run import TAIL_LINES, LineSink, ProcResult
from harness.process.secret_names import masked
from harness.results import layout
from harness.results.cause import Cause, CauseRecord
from harness.results.facts import DeviceFingerprint
from harness.results.outcome import Status, SuiteOutcome
from harness.results.writefail import QuietClose
from harness.runners.container import Container, reap_orphans
from harness.runners.docker_spec import (
    build_spec,
    cli_args,
    container_env,
    sdk_options,
    suite_mounts,
)
from harness.runners.local import classify
from harness.runners.suite_env import suite_env

if TYPE_CHECKING:
    import docker

    from harness.matrix.model import Matrix
    from harness.results.manifest_write import ManifestWriter
    from harness.runners.invocation import Invocation


def _root() -> Path:
    return repo_root().resolve()


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class DockerRun:
    """One run in the platform's container; the defaults are ``harness run``'s."""

    matrix: Matrix
    run_dir: Path
    keep_container: bool = False
    env: Mapping[str, str] | None = None  # None: default_env
    manifest: ManifestWriter | None = None
    stream: TextIO | None = sys.stdout
    root: Path | None = None  # None: the project root
    client: docker.DockerClient | None = None
    image: str | None = None  # None: build (or reuse) the matrix's image
    run_id: str | None = None  # None: the run folder's name
    cache_root: Path | None = None
    writable_checkout: bool = False


def run_invocations(run: DockerRun, invocations: Sequence[Invocation]) -> list[SuiteOutcome]:
    matrix, root, run_dir = run.matrix, run.root or _root(), run.run_dir.resolve()
    out = run.stream or open(os.devnull, "w")  # noqa: SIM115
    client = run.client or images.engine()
    image = run.image
    if image is None:
        rcp, _ = images.build(matrix, root, log_path=run_dir / layout.LOGS_DIR / "image.log",
                              out=out, client=client)
        image = rcp.tag
    spec = build_spec(matrix, root, run_dir, cache_root=run.cache_root,
                      extra_mounts=suite_mounts(invocations),
                      writable_checkout=run.writable_checkout)
    for mount in spec.mounts:
        if not mount.read_only:
            Path(mount.source).mkdir(parents=True, exist_ok=True)  # else docker makes it root's
    env = run.env if run.env is not None else default_env(matrix, root)
    base_env = container_env(matrix, dict(env), os.environ)
    if run.manifest is not None:
        run.manifest.update(image=image, container_env=masked(base_env))
    run_id = run.run_id or run_dir.name
    for name in reap_orphans(client):
        out.write(f"harness: removed container {name}: the harness run that owned it is gone\n")
    options = sdk_options(spec)

    def new_box() -> Container:
        return Container(client, image=image, run_id=run_id, options=options,
                         keep=run.keep_container)

    outcomes: list[SuiteOutcome] = []
    with contextlib.ExitStack() as boxes:
        box = boxes.enter_context(new_box())
        fingerprint = _probe(box, matrix, spec.user)
        if fingerprint is not None:
            (run_dir / layout.FINGERPRINT).write_text(json.dumps(fingerprint, indent=2))
            if run.manifest is not None:
                run.manifest.update(device_fingerprint=DeviceFingerprint(fingerprint))
        for inv in invocations:
            if not box.alive():  # killed from outside, or by a timeout: a fresh one
                boxes.close()
                box = boxes.enter_context(new_box())
            outcome = run_one(box, inv, base_env, spec.user, out, argv=list(inv.argv))
            outcomes.append(outcome)
            if outcome.status in (Status.INTERRUPTED, Status.WRITE_FAILED):
                break
    return outcomes


def _probe(box: Container, matrix: Matrix, user: str) -> dict[str, Any] | None:
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
            return {"kind": matrix.probe.kind, "error": last}
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
            out: TextIO, *, argv: Sequence[str] | None = None) -> SuiteOutcome:
    inv.junit.parent.mkdir(parents=True, exist_ok=True)
    inv.log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(base_env) | dict(inv.env)
    argv = list(argv or inv.argv)
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
        code = result.exit_code
        notes = []
        seen: CauseRecord | None = None  # what the container saw that the exit code hides
        if result.timed_out:
            notes.append(f"harness: killed after {inv.timeout_s:g} s (step timeout)")
        if result.container_died and not (result.timed_out or result.interrupted):
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
        for note in notes:
            sink.line(note)
    proc = ProcResult(exit_code=code, duration_s=result.duration_s,
                      timed_out=result.timed_out, interrupted=result.interrupted,
                      write_error=sink.error, tail=list(sink.tail))
    outcome = classify(inv, proc)
    outcome.cause = seen or outcome.cause
    extra = [n.removeprefix("harness: ") for n in notes if "step timeout" not in n]
    if extra:
        outcome.reason = "; ".join([outcome.reason, *extra]) if outcome.reason else "; ".join(extra)
    return outcome
