"""One process imports the engine once; each suite's pytest runs in a process forked from it.

``python .../harness/process/forkserver.py serve SOCKET MODULE...`` (in the suite's
interpreter and environment; run as a file, so that the ``harness`` package is imported in
each child by pytest, not before it) imports the modules, checks that a process forked
from it can still work, says ``ready`` (or ``unsafe: why``) on its stdout, and then serves
one request at a time.
``python .../forkserver.py run SOCKET -- ARGV...`` stands in for ``ARGV`` (a
``python -m pytest ...`` command): it hands the server its stdin, stdout and stderr, its
working folder and environment; the server forks, the child takes them over and runs
pytest; the stand-in ends as the child ended (its exit code, or killed by its signal), so
whoever started it (the runner, with its timeouts, logs and crash reading) sees a pytest
process like any other. A signal sent to the stand-in (a timeout, Ctrl-C) goes to the
child's process group; a stand-in killed outright leaves the server to kill the child.

What a process must not have done before it forks, checked once the modules are imported:
another Python thread, an initialised GPU (torch.cuda), and a parallel region of GNU
OpenMP (a forked child of such a process hangs in its next one: seen with torch's CPU
build, whose libgomp keeps a pool the child does not have). The last is checked by doing:
a forked canary runs one of torch's parallel kernels under a deadline. Where a check
fails the server refuses every request with its reason, and the stand-in runs ``ARGV``
itself, in a fresh process, after one line saying why.

Standard library only until the modules are imported: it runs in any suite interpreter.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import signal
import socket
import sys
import time
from types import ModuleType
from typing import TypedDict

_MAX_HEADER = 1 << 22  # argv and environment of one request
TAG = "harness-forkserver: "  # the line the runner waits for: "<TAG>ready: ..." / "unsafe: ..."
_CANARY_S = 20.0


class Request(TypedDict):
    """The stand-in's header line: its command and where and how it runs."""

    argv: list[str]
    env: dict[str, str]
    cwd: str


class Reply(TypedDict, total=False):
    """One line of the server's: the child's pid, then its wait status; or why not."""

    refused: str
    pid: int
    status: int


def _send(conn: socket.socket, message: Reply) -> None:
    """A reply line to the stand-in; one that has gone (killed outright) is no reason for
    the server to end: the reply is dropped, and the next request is served."""
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(message).encode() + b"\n")


def _recv_line(conn: socket.socket) -> Reply | None:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
        if len(data) > _MAX_HEADER:
            return None
    found: Reply = json.loads(data)
    return found if isinstance(found, dict) else None


# -- the server ------------------------------------------------------------------------------


def fork_hazard() -> str | None:
    """Why a process forked from this one could not work; None where it can."""
    import threading

    others = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    if others:
        return f"Python threads running: {', '.join(others)}"
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        return "torch initialised a GPU before the fork"
    return _canary(torch)


def _canary(torch: ModuleType) -> str | None:
    """A forked child runs one parallel kernel (a GNU OpenMP region) within the deadline."""
    pid = os.fork()
    if pid == 0:
        try:
            torch.ones(1 << 22).add_(1).sum()
        finally:
            os._exit(0)
    deadline = time.monotonic() + _CANARY_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return None if code == 0 else f"a forked child's parallel kernel ended with {code}"
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return (f"a forked child's parallel kernel hung past {_CANARY_S:g} s (an OpenMP region ran "
            "before the fork)")


def serve(path: str, modules: list[str]) -> int:
    import importlib

    sys.path[0] = os.getcwd()  # as `python -m pytest` would see it, not this file's folder
    started = time.monotonic()
    hazard: str | None = None
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            hazard = f"import {name} failed: {type(exc).__name__}: {exc}"
            break
    hazard = hazard or fork_hazard()
    # What the imports made stays out of the children's garbage collections: a collection
    # touches every object it tracks, copying each page the fork shared (seconds a child).
    gc.collect()
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    took = time.monotonic() - started
    said = (f"unsafe: {hazard}" if hazard
            else f"ready: imported {', '.join(modules)} in {took:.1f} s")
    # Tagged: what the imports logged to stdout (vLLM's logger does) comes before it.
    print(f"{TAG}{said}", flush=True)
    quiet = os.open(os.devnull, os.O_WRONLY)  # nothing more goes to the runner's pipe
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    while True:
        conn, _ = listener.accept()
        with conn:
            _serve_one(conn, listener, hazard)


def _serve_one(conn: socket.socket, listener: socket.socket, hazard: str | None) -> None:
    try:
        data, fds = _recv_request(conn)
    except OSError:  # nothing received: no descriptor to close
        return
    try:
        if data is None or len(fds) != 3:
            return
        if hazard:
            _send(conn, {"refused": hazard})
            return
        pid = os.fork()
        if pid == 0:  # the child: never returns (it takes the descriptors over)
            listener.close()
            conn.close()
            _become(data, fds)
    finally:  # this process's copies, whatever came of the request
        for fd in fds:
            os.close(fd)
    _send(conn, {"pid": pid})
    # a stand-in gone meanwhile: _wait kills its child, and the reply is dropped
    _send(conn, {"status": _wait(pid, conn)})


def _recv_request(conn: socket.socket) -> tuple[Request | None, list[int]]:
    """The header line and the three file descriptors sent with its first bytes; None for
    a header that cannot be read, with whatever descriptors came (the caller closes them)."""
    msg, fds, _flags, _addr = socket.recv_fds(conn, 65536, 3)
    data = msg
    try:
        while not data.endswith(b"\n") and len(data) < _MAX_HEADER:
            chunk = conn.recv(65536)
            if not chunk:
                return None, list(fds)
            data += chunk
        found: Request = json.loads(data)
    except (OSError, ValueError):
        return None, list(fds)
    return (found if isinstance(found, dict) else None), list(fds)


def _wait(pid: int, conn: socket.socket) -> int:
    """The child's wait status; a stand-in that went away takes its child with it."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        ready, _, _ = select.select([conn], [], [], 0.2)
        if ready and not conn.recv(1, socket.MSG_PEEK):
            _kill_group(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1]


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _become(request: Request, fds: list[int]) -> None:
    """In the forked child: the stand-in's streams, folder and environment, then pytest
    as ``python -m pytest`` would run it there."""
    code = 70  # EX_SOFTWARE: the request could not be carried out
    try:
        os.setsid()  # its own group: a timeout takes the child and what it started
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv = list(request["argv"])
        if argv[1:3] != ["-m", "pytest"]:
            raise ValueError(f"not a python -m pytest command: {argv[:3]}")
        sys.path[0] = os.getcwd()  # as `python -m` puts its folder first
        sys.argv = ["pytest", *argv[3:]]
        import pytest

        code = int(pytest.main(argv[3:]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # said; the child ends with 70
        with contextlib.suppress(BaseException):
            print(f"harness: forkserver: {type(exc).__name__}: {exc}", file=sys.stderr,
                  flush=True)
    # The Python atexit handlers run, as in a process of its own; the interpreter's own
    # teardown does not (what the server imported is frozen, never collected: extension
    # modules would count it as leaked).
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


# -- the stand-in ----------------------------------------------------------------------------


def run(path: str, argv: list[str]) -> int:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        header = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()})
        socket.send_fds(conn, [header.encode() + b"\n"], [0, 1, 2])
        first = _recv_line(conn)
    except OSError as exc:
        first = {"refused": f"the server cannot be reached ({exc})"}
    if first is None or "refused" in first:
        why = (first or {}).get("refused", "the server closed the connection")
        print(f"harness: forkserver: {why}: a fresh process instead", file=sys.stderr, flush=True)
        conn.close()
        os.execv(argv[0], argv)
    pid = int(first["pid"])

    def forward(signum: int, _frame: object) -> None:
        _kill_group(pid, signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    ended = _recv_line(conn)
    conn.close()
    if ended is None:
        return 70
    code = os.waitstatus_to_exitcode(int(ended["status"]))
    if code < 0:  # killed by a signal: end the same way, for the runner's crash reading
        with contextlib.suppress(OSError):  # SIGKILL (the OOM killer's) has no handler
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def main(args: list[str]) -> int:
    if len(args) >= 2 and args[0] == "serve":
        return serve(args[1], args[2:])
    if len(args) >= 4 and args[0] == "run" and args[2] == "--":
        return run(args[1], args[3:])
    print("usage: python forkserver.py serve SOCKET MODULE... | run SOCKET -- ARGV...",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
