"""One context-manager class around the container engine (docker SDK).

A run's container lives from ``__enter__`` to ``__exit__``: it is created with a
unique name and the run's label, removed again if start-up fails, and in ``finally``
always stopped (bounded), killed and removed, unless kept for debugging
(``keep=True`` or ``HARNESS_KEEP_CONTAINER=1``). Commands run inside it with
``exec``, each wrapped so its pid is known: a timeout or Ctrl-C is first delivered
as SIGINT to that process (pytest then still writes its JUnit), then SIGTERM, then
the whole container is killed.

Each container is labelled with the harness process that owns it (host name, pid and
the pid's start time): a harness killed outright (SIGKILL, a lost agent) cannot remove
its container, so every start reaps this host's harness containers whose owner is gone.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import InfraError
from harness.process import cancel
from harness.process.run import ProcResult
from harness.process.watch import Stop, watch

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container as SdkContainer

LABEL_RUN = "org.harness.run"
LABEL_OWNER = "org.harness.owner"
LABEL_HOST = "org.harness.host"
LABEL_PID = "org.harness.pid"  # "<pid>:<start time in clock ticks>" of the harness process
KEEP_ENV = "HARNESS_KEEP_CONTAINER"
STOP_TIMEOUT_S = 10
INTERRUPT_GRACE_S = 10.0
TERMINATE_GRACE_S = 5.0
CANCEL_REMOVE_WAIT_S = 3
# PID 1 that reaps the exec'd processes' orphans and exits at once on SIGTERM.
KEEPALIVE = ["sh", "-c", 'trap "exit 0" TERM INT; while :; do sleep 3600 & wait $!; done']
# Records the exec'd process's pid inside the container, then becomes the command.
_PID_WRAPPER = 'echo $$ > "$0"; exec "$@"'


def process_token(pid: int) -> str:
    """``pid:start`` from /proc, so a recycled pid does not pass for its owner."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat[stat.rindex(")") + 2 :].split()
    return f"{pid}:{fields[19]}" if len(fields) > 19 else ""


def owner_labels() -> dict[str, str]:
    return {LABEL_HOST: socket.gethostname(), LABEL_PID: process_token(os.getpid())}


def owner_gone(labels: Mapping[str, str]) -> bool:
    """Only this host's containers, and only when their harness process no longer runs."""
    token = labels.get(LABEL_PID, "")
    if labels.get(LABEL_HOST) != socket.gethostname() or ":" not in token:
        return False
    pid = int(token.split(":", 1)[0]) if token.split(":", 1)[0].isdigit() else 0
    return pid > 0 and process_token(pid) != token


def reap_orphans(client: docker.DockerClient) -> list[str]:
    """Remove the containers of harness runs whose process is gone; their names."""
    import docker.errors
    import requests

    reaped = []
    try:
        found = client.containers.list(all=True, filters={"label": f"{LABEL_OWNER}=harness"})
    except (docker.errors.DockerException, requests.RequestException):
        return []
    for box in found:
        if not owner_gone(box.labels or {}):
            continue
        try:
            box.remove(force=True, v=True)
            reaped.append(str(box.name))
        except (docker.errors.DockerException, requests.RequestException):
            continue
    return reaped


def keep_requested(flag: bool) -> bool:
    return flag or os.environ.get(KEEP_ENV, "") not in ("", "0", "false", "no")


def _graces(why: Stop) -> tuple[float, float]:
    """(after SIGINT, after SIGTERM) before the next, harder step, then the container is
    killed; SIGINT first in every case, so pytest still writes its JUnit."""
    if why is Stop.REQUESTED:  # its output can no longer be written
        return 2.0, TERMINATE_GRACE_S
    if why is Stop.TIMEOUT:
        return INTERRUPT_GRACE_S, TERMINATE_GRACE_S
    return cancel.grace()


class LineSplitter:
    """The SDK yields one chunk per write of the process: rebuild whole lines."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        self._on_line = on_line
        self._pending = b""

    def feed(self, chunk: bytes) -> None:
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for raw in lines:
            self._on_line(raw.decode("utf-8", "replace").rstrip("\r"))

    def close(self) -> None:
        if self._pending:
            self._on_line(self._pending.decode("utf-8", "replace"))
            self._pending = b""


class Container:
    def __init__(self, client: docker.DockerClient, *, image: str, run_id: str,
                 options: Mapping[str, Any], keep: bool = False,
                 stop_timeout_s: int = STOP_TIMEOUT_S) -> None:
        self.client = client
        self.image = image
        self.run_id = run_id
        self.options = dict(options)
        self.keep = keep_requested(keep)
        self.stop_timeout_s = stop_timeout_s
        self.name = f"harness-{run_id}-{uuid.uuid4().hex[:8]}".lower()
        self._container: SdkContainer | None = None

    # -- lifetime ---------------------------------------------------------------------
    def __enter__(self) -> Container:
        import docker.errors

        labels = {LABEL_RUN: self.run_id, LABEL_OWNER: "harness", **owner_labels(),
                  **self.options.pop("labels", {})}
        try:
            self._container = self.client.containers.create(
                self.image, KEEPALIVE, name=self.name, labels=labels, detach=True,
                stdin_open=False, tty=False, **self.options)
            self._container.start()
        except (docker.errors.DockerException, OSError) as error:
            self.remove()
            message = getattr(error, "explanation", None) or str(error)
            raise InfraError(f"docker: cannot start container from {self.image}: "
                             f"{message}") from None
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.keep and self._container is not None:
            print(f"harness: kept container {self.name} for debugging; remove it with "
                  f"`docker rm -f {self.name}`", file=sys.stderr)
            return
        self.remove()

    def remove(self) -> None:
        """Bounded stop, then kill, then remove; each step tolerates a gone container."""
        import docker.errors
        import requests

        target = self._container
        if target is None:
            try:
                target = self.client.containers.get(self.name)
            except (docker.errors.DockerException, requests.RequestException):
                return
        gone = (docker.errors.NotFound,)
        for step in ("stop", "kill", "remove"):
            try:
                if step == "stop":
                    target.stop(timeout=self.stop_timeout_s)
                elif step == "kill":
                    target.reload()
                    if target.status in ("running", "paused", "restarting"):
                        target.kill()
                elif cancel.received() is not None:
                    self._remove_in_background(str(target.id))
                else:
                    target.remove(force=True, v=True)
            except gone:
                break
            except (docker.errors.DockerException, requests.RequestException):
                continue  # the next, harder step still runs
        self._container = None

    def _remove_in_background(self, container_id: str) -> None:
        """On a cancel the grace is short and removing a stopped container can take tens of
        seconds (vfs deletes a whole copy of the image): ask the engine, which finishes the
        removal on its own, and stop waiting after a few seconds."""
        import requests

        api = self.client.api
        saved = api.timeout
        api.timeout = CANCEL_REMOVE_WAIT_S
        try:
            api.remove_container(container_id, force=True, v=True)
        except requests.exceptions.ReadTimeout:
            pass
        finally:
            api.timeout = saved

    @property
    def id(self) -> str:
        if self._container is None:
            raise InfraError("docker: container is not running")
        return str(self._container.id)

    def alive(self) -> bool:
        import docker.errors
        import requests

        if self._container is None:
            return False
        try:
            self._container.reload()
        except (docker.errors.DockerException, requests.RequestException):
            return False
        return self._container.status == "running"

    def state(self) -> dict[str, Any]:
        import docker.errors

        try:
            attrs: dict[str, Any] = self.client.api.inspect_container(self.name)
        except docker.errors.DockerException:
            return {}
        return dict(attrs.get("State", {}))

    # -- commands ---------------------------------------------------------------------
    def run_quick(self, argv: Sequence[str], *, user: str | None = None,
                  env: Mapping[str, str] | None = None) -> tuple[int | None, str]:
        """A short command (probe, signal): its exit code and its whole output."""
        kwargs: dict[str, Any] = {"environment": dict(env or {})}
        if user:
            kwargs["user"] = user
        exec_id = self.client.api.exec_create(self.id, list(argv), **kwargs)["Id"]
        out = self.client.api.exec_start(exec_id)
        code = self.client.api.exec_inspect(exec_id).get("ExitCode")
        return code, out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out)

    def exec(self, argv: Sequence[str], *, env: Mapping[str, str], workdir: str, user: str,
             on_line: Callable[[str], None], timeout_s: float,
             stop_requested: Callable[[], bool] = lambda: False) -> ProcResult:
        """Run ``argv`` streaming whole lines; stop it at ``timeout_s``, on Ctrl-C, SIGTERM
        or SIGHUP, or when ``stop_requested()`` (its output can no longer be written)."""
        pidfile = f"/tmp/harness-exec-{uuid.uuid4().hex[:12]}.pid"
        cmd = ["sh", "-c", _PID_WRAPPER, pidfile, *argv]
        api = self.client.api
        start = time.monotonic()
        exec_id = api.exec_create(self.id, cmd, environment=dict(env), workdir=workdir,
                                  user=user, stdout=True, stderr=True)["Id"]
        stream = api.exec_start(exec_id, stream=True, demux=False)
        splitter = LineSplitter(on_line)

        def pump() -> None:
            try:
                for chunk in stream:
                    splitter.feed(chunk)
            except Exception:  # the connection drops when the container is killed
                pass
            finally:  # the stream's socket, closed here rather than by the garbage collector
                close = getattr(stream, "close", None)
                if callable(close):
                    with contextlib.suppress(Exception):
                        close()
            splitter.close()

        reader = threading.Thread(target=pump, daemon=True, name=f"logs-{self.name}")
        reader.start()

        def ended(seconds: float) -> bool:
            reader.join(timeout=seconds)
            return not reader.is_alive()

        watched = watch(ended, deadline=start + max(timeout_s, 0.0),
                        stop=lambda why: self._stop_exec(pidfile, reader, _graces(why)),
                        stop_requested=stop_requested)
        reader.join(timeout=5)
        return ProcResult(exit_code=self._exit_code(exec_id), duration_s=time.monotonic() - start,
                          timed_out=watched.timed_out, interrupted=watched.interrupted)

    def died(self, exit_code: int | None) -> bool:
        """Whether the container is gone after an exec that ended with ``exit_code``."""
        if not self.alive():
            return True
        if exit_code in (None, 137, 143):
            # A kill from outside ends the exec a moment before the engine marks the
            # container exited: look again briefly before calling it an OOM kill.
            for _ in range(10):
                time.sleep(0.1)
                if not self.alive():
                    return True
        return False

    def _exit_code(self, exec_id: str) -> int | None:
        import docker.errors

        for _ in range(20):  # the engine records the code a moment after the stream ends
            try:
                info = self.client.api.exec_inspect(exec_id)
            except docker.errors.DockerException:
                return None
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            time.sleep(0.05)
        return None

    def _stop_exec(self, pidfile: str, reader: threading.Thread,
                   graces: tuple[float, float]) -> None:
        """SIGINT (pytest writes JUnit), then SIGTERM, then kill the container."""
        for sig, grace in zip(("INT", "TERM"), graces, strict=True):
            try:
                self.run_quick(["sh", "-c", f'kill -{sig} "$(cat {pidfile})"'])
            except Exception:
                break
            deadline = time.monotonic() + grace
            while reader.is_alive() and time.monotonic() < deadline and not cancel.hurry():
                reader.join(timeout=0.2)
            if not reader.is_alive():
                return
        try:
            if self._container is not None:
                self._container.kill()
        except Exception:
            pass
