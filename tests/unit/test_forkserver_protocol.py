"""The fork server and its stand-in (process/forkserver.py), started by the local runner's
ForkServer (runners/forkserver.py) as a run starts it, with a light module preloaded in
place of an engine: each request's streams, folder, environment and exit, a child killed
by a signal, a stand-in signalled or killed outright, each reason a server refuses, and
the runner's side (which suites run forked, a server that dies or never says ready).
Seconds in all; test_forkserver.py walks the same through `harness run` with torch."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.process import forkserver
from harness.runners import forkserver as runner_side
from harness.runners.forkserver import SCRIPT, ForkServer
from harness.runners.invocation import Invocation
from tests.processes import ended_within

pytestmark = pytest.mark.timeout(60)
# A step that does not come within this is a broken server: fail in seconds, not minutes
# (the mutation run's every mutant pays for a hang).
WAIT_S = 15.0

ENGINE = """
import os, pathlib
print("[engine] logged to stdout while importing")
pathlib.Path(os.environ["ENGINE_LOG"]).write_text(str(os.getpid()))
"""

THREADED = """
import threading, time
threading.Thread(target=time.sleep, args=(60,), name="poller", daemon=True).start()
"""

WHO = """
import json, os, sys

def test_who():
    line = {"pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(),
            "engine": "light_engine" in sys.modules, "argv": sys.argv, "path": sys.path,
            "asked": os.environ.get("ASKED"), "server_only": os.environ.get("SERVER_ONLY"),
            "stdin": sys.stdin.readline().strip()}
    print("to-stdout")
    print("to-stderr", file=sys.stderr)
    with open(os.environ["WHO_LOG"], "a") as out:
        out.write(json.dumps(line) + "\\n")
"""

FAILS = """
def test_fails():
    assert False
"""

KILLED = """
import os, signal

def test_killed():
    sig = getattr(signal, os.environ.get("KILL_WITH", "SIGKILL"))
    if sig != signal.SIGKILL:  # a launcher may have left it ignored (nohup: SIGHUP)
        signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
"""

SLEEPS = """
import os, subprocess, time

def test_sleeps():
    helper = subprocess.Popen(["sleep", "60"])
    with open(os.environ["PID_FILE"], "w") as out:
        out.write(f"{os.getpid()} {helper.pid}")
    time.sleep(60)
"""


def invocation(argv: tuple[str, ...], workers: int = 1) -> Invocation:
    return Invocation(suite="s", argv=argv, junit=Path("j.xml"), log=Path("l.log"),
                      partial=Path("p.jsonl"), timeout_s=60, workers=workers)


def pytest_argv(test_file: Path) -> tuple[str, ...]:
    return (sys.executable, "-m", "pytest", str(test_file), "-q", "-s", "-p", "no:cacheprovider")


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    for name, text in (("light_engine", ENGINE), ("threaded_engine", THREADED),
                       ("test_who", WHO), ("test_fails", FAILS), ("test_killed", KILLED),
                       ("test_sleeps", SLEEPS)):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    (tmp_path / "test_empty.py").write_text("")
    return tmp_path


def _environ(*left_out: str) -> dict[str, str]:
    """This process's environment less pytest's own variables, PYTHONPATH and ``left_out``."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "PYTHONPATH", *left_out))}


def server_env(scratch: Path) -> dict[str, str]:
    # PYTHONUNBUFFERED left out (set on some agents): the server flushes its ready line itself
    return {**_environ("PYTHONUNBUFFERED"), "ENGINE_LOG": str(scratch / "engine.log"),
            "SERVER_ONLY": "1", "PYTHONPATH": str(scratch)}  # the preloaded modules


def client_env(scratch: Path, **more: str) -> dict[str, str]:
    return {**_environ(), "WHO_LOG": str(scratch / "who.log"), **more}


@pytest.fixture(autouse=True)
def _start_within(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_side, "_START_TIMEOUT_S", WAIT_S)


@pytest.fixture
def started(scratch: Path) -> Iterator[tuple[ForkServer, list[str]]]:
    said: list[str] = []
    server = ForkServer(["light_engine"], say=said.append)
    try:
        yield server, said
    finally:
        server.stop()


@contextlib.contextmanager
def serving(scratch: Path, name: str, *modules: str
            ) -> Iterator[tuple[subprocess.Popen[str], str, list[str]]]:
    """A server started by hand (not through ForkServer), its first line, and once the
    block ends (the server killed) what else it wrote to its stdout and stderr."""
    serve = subprocess.Popen([sys.executable, str(SCRIPT), "serve", str(scratch / name),
                              *modules], cwd=scratch, env=server_env(scratch),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    after: list[str] = []
    try:
        yield serve, runner_side._first_line(serve, WAIT_S), after
    finally:
        os.killpg(serve.pid, signal.SIGKILL)
        after.extend(serve.communicate(timeout=WAIT_S))  # reaped, its pipes closed


def stand_in(server: ForkServer, scratch: Path, test: str, *, stdin: str = "",
             cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    argv = server.argv_for(invocation(pytest_argv(scratch / test)), server_env(scratch))
    return subprocess.run(argv, cwd=cwd or scratch / "work", env=client_env(scratch, **env),
                          input=stdin, capture_output=True, text=True, timeout=WAIT_S, check=False)


def who(scratch: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in (scratch / "who.log").read_text().splitlines()]


# -- the server and its stand-in -------------------------------------------------------------


def test_each_request_is_forked_with_the_stand_ins_streams_folder_and_environment(
        scratch: Path, started: tuple[ForkServer, list[str]]) -> None:
    server, said = started
    first = stand_in(server, scratch, "test_who.py", stdin="from-stdin\n", ASKED="yes",
                     cwd=scratch / "work")
    assert server.state.startswith("ready: imported light_engine in "), server.state
    assert said == [f"harness: fork server {server.state}; one-worker suites run forked "
                    "from it"]
    assert first.returncode == 0, first.stdout + first.stderr
    assert "to-stdout" in first.stdout and "1 passed" in first.stdout
    assert "to-stderr" in first.stderr and "to-stdout" not in first.stderr
    # a second request, and a third, from the same server (one at a time)
    second = stand_in(server, scratch, "test_who.py", stdin="again\n", cwd=scratch)
    assert second.returncode == 0, second.stdout + second.stderr
    engine = int((scratch / "engine.log").read_text())
    one, two = who(scratch)
    assert one["ppid"] == two["ppid"] == engine and one["pid"] != two["pid"] != engine
    assert one["engine"] is True
    assert one["argv"] == ["pytest", *pytest_argv(scratch / "test_who.py")[3:]]
    assert (one["cwd"], two["cwd"]) == (str(scratch / "work"), str(scratch))
    # the child's folder on its path, ahead of the installed packages, as `python -m` has
    # it; the server's own folder (this process's) not
    for line in (one, two):
        path = line["path"]
        assert isinstance(path, list) and line["cwd"] in path
        installed = min(i for i, entry in enumerate(path) if "-packages" in entry)
        assert path.index(line["cwd"]) < installed and os.getcwd() not in path
    assert (one["stdin"], two["stdin"]) == ("from-stdin", "again")
    # the stand-in's environment, whole and alone: none of the server's own
    assert (one["asked"], two["asked"], one["server_only"]) == ("yes", None, None)


def test_the_stand_in_ends_as_its_child_ended(
        scratch: Path, started: tuple[ForkServer, list[str]]) -> None:
    server, _ = started
    assert stand_in(server, scratch, "test_fails.py").returncode == 1
    assert stand_in(server, scratch, "test_empty.py").returncode == 5  # no tests collected
    killed = stand_in(server, scratch, "test_killed.py")
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    hup = stand_in(server, scratch, "test_killed.py", KILL_WITH="SIGHUP")  # signal 1
    assert hup.returncode == -signal.SIGHUP, hup.stdout + hup.stderr
    # an environment larger than one read of the header (CI agents' can be)
    big = stand_in(server, scratch, "test_who.py", **{f"BIG_{i}": "x" * 60_000 for i in range(5)})
    assert big.returncode == 0, big.stdout + big.stderr
    assert who(scratch)[-1]["engine"] is True  # forked: the server read the whole header
    assert stand_in(server, scratch, "test_who.py").returncode == 0  # still serving


def test_a_request_that_is_not_pytest_ends_70_and_says_why(
        scratch: Path, started: tuple[ForkServer, list[str]]) -> None:
    server, _ = started
    server.argv_for(invocation(pytest_argv(scratch / "test_who.py")), server_env(scratch))
    assert server._socket is not None
    done = subprocess.run([sys.executable, str(SCRIPT), "run", str(server._socket), "--",
                           sys.executable, "-c", "print('not pytest')", "more"],
                          capture_output=True, text=True, timeout=WAIT_S, check=False)
    assert done.returncode == 70
    command = [sys.executable, "-c", "print('not pytest')", "more"]
    assert ("harness: forkserver: ValueError: not a python -m pytest command: "
            f"{command[:3]}") in done.stderr
    assert "not pytest" not in done.stdout


def _pids(scratch: Path) -> list[int]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        text = (scratch / "pid").read_text() if (scratch / "pid").exists() else ""
        if len(text.split()) == 2:
            return [int(x) for x in text.split()]
        time.sleep(0.05)
    raise AssertionError("the test never wrote its pids")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_stand_in_goes_to_its_childs_group(
        scratch: Path, started: tuple[ForkServer, list[str]], sig: int) -> None:
    server, _ = started
    argv = server.argv_for(invocation(pytest_argv(scratch / "test_sleeps.py")),
                           server_env(scratch))
    proc = subprocess.Popen(argv, cwd=scratch, env=client_env(scratch, PID_FILE=str(
        scratch / "pid")), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    child, helper = _pids(scratch)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=WAIT_S)
    # SIGTERM kills the child's pytest outright; SIGINT is its KeyboardInterrupt (exit 2)
    assert proc.returncode == (-signal.SIGTERM if sig == signal.SIGTERM else 2), out + err
    assert ended_within(child, 10) and ended_within(helper, 10)


def test_a_stand_in_killed_outright_takes_its_child_with_it(
        scratch: Path, started: tuple[ForkServer, list[str]]) -> None:
    server, _ = started
    argv = server.argv_for(invocation(pytest_argv(scratch / "test_sleeps.py")),
                           server_env(scratch))
    proc = subprocess.Popen(argv, cwd=scratch, env=client_env(scratch, PID_FILE=str(
        scratch / "pid")), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child, helper = _pids(scratch)
    proc.kill()
    proc.wait(timeout=WAIT_S)
    assert ended_within(child, 10, reap=True) and ended_within(helper, 10)
    # the server serves on, forked (not the stand-in's fallback to a fresh process)
    assert stand_in(server, scratch, "test_who.py").returncode == 0
    (last,) = who(scratch)
    assert last["engine"] is True and last["ppid"] == int((scratch / "engine.log").read_text())


def test_an_unsafe_server_refuses_and_the_stand_in_runs_its_command_itself(
        scratch: Path) -> None:
    said: list[str] = []
    server = ForkServer(["threaded_engine"], say=said.append)
    try:
        inv = invocation(pytest_argv(scratch / "test_who.py"))
        argv = server.argv_for(inv, server_env(scratch))
        assert server.state == "unsafe: Python threads running: poller"
        assert said == ["harness: fork server unsafe: Python threads running: poller; the "
                        "suites run in fresh processes"]
        assert argv == inv.argv and server._socket is None and server._proc is None
        assert server.argv_for(inv, server_env(scratch)) == inv.argv and len(said) == 1
    finally:
        server.stop()
    assert server.state == "unsafe: Python threads running: poller"


def test_a_refusal_runs_the_command_fresh_with_one_line(scratch: Path) -> None:
    """The server side of a refusal (an import that failed), and a server that cannot be
    reached: either way the stand-in's own process runs the command."""
    sock = scratch / "s.sock"
    with serving(scratch, sock.name, "json", "no_such_engine_module") as (_, line, _):
        assert line == ("unsafe: import no_such_engine_module failed: ModuleNotFoundError: "
                        "No module named 'no_such_engine_module'")
        for where, why in ((sock, "import no_such_engine_module failed: "
                                  "ModuleNotFoundError: No module named "
                                  "'no_such_engine_module'"),
                           (scratch / "absent.sock", "the server cannot be reached (")):
            proc = subprocess.Popen(
                [sys.executable, str(SCRIPT), "run", str(where), "--",
                 *pytest_argv(scratch / "test_who.py")], cwd=scratch, env=client_env(scratch),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            out, err = proc.communicate("x\n", timeout=WAIT_S)
            assert proc.returncode == 0, out + err
            assert f"harness: forkserver: {why}" in err and "a fresh process instead" in err
            last = who(scratch)[-1]
            assert last["pid"] == proc.pid and last["engine"] is False  # exec'd in place


def _stand_in_to_a_fake_server(scratch: Path, reply: bytes) -> tuple[int, str, str]:
    """A stand-in (running a failing test) talking to a server that reads its request,
    writes ``reply`` and closes: its exit code, stdout and stderr."""
    sock = scratch / "fake.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    listener.listen(1)
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "run", str(sock), "--",
                             *pytest_argv(scratch / "test_fails.py")], cwd=scratch,
                            env=client_env(scratch), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    conn, _ = listener.accept()
    with conn, listener:
        conn.recv(1 << 16)
        conn.sendall(reply)
    out, err = proc.communicate(timeout=WAIT_S)
    return proc.returncode, out, err


def test_a_server_that_closes_without_a_reply_is_a_refusal(scratch: Path) -> None:
    code, out, err = _stand_in_to_a_fake_server(scratch, b"")
    assert "harness: forkserver: the server closed the connection: a fresh process" in err
    assert code == 1, out + err  # the failing test, run fresh


def test_a_server_that_ends_before_the_childs_status_leaves_the_stand_in_at_70(
        scratch: Path) -> None:
    code, out, err = _stand_in_to_a_fake_server(scratch, b'{"pid": 999999999}\n')
    assert code == 70, out + err


def test_requests_the_server_cannot_read_get_no_reply_and_it_serves_on(
        scratch: Path, started: tuple[ForkServer, list[str]]) -> None:
    server, _ = started
    server.argv_for(invocation(pytest_argv(scratch / "test_who.py")), server_env(scratch))
    assert server._socket is not None
    for count, body in ((1, b'{"argv": [], "env": {}, "cwd": "/"}\n'),  # one stream, not 3
                        (3, b"[1, 2]\n"),  # not an object
                        (3, b"{not json\n"),
                        (3, b'{"argv": []')):  # closed before the line ended
        read, write = os.pipe()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(str(server._socket))
                socket.send_fds(conn, [body], [write] * count)
                os.close(write)
                conn.shutdown(socket.SHUT_WR)
                conn.settimeout(WAIT_S)
                assert conn.recv(100) == b"", body
            # the server closed what it was handed: the pipe's last writer is gone
            assert select.select([read], [], [], WAIT_S)[0], body
            assert os.read(read, 1) == b"", body
        finally:
            os.close(read)
    assert stand_in(server, scratch, "test_who.py").returncode == 0


def test_usage() -> None:
    for args in ([], ["serve"], ["run", "s", "x", "argv"], ["run", "s", "--"], ["other", "s"]):
        done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                              text=True, timeout=WAIT_S, check=False)
        assert done.returncode == 2, args
        assert done.stderr.startswith("usage: python forkserver.py serve SOCKET MODULE"), args


# -- the server's own checks, in a process of their own (no test runner's threads) ----------


HAZARD = """
import importlib.util, json, sys, types
spec = importlib.util.spec_from_file_location("fs", sys.argv[1])
fs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fs)
kind = sys.argv[2]
fs._CANARY_S = 10.0 if kind == "torch-quiet" else 1.0

if kind.startswith("torch-"):  # the real thing: torch's CPU build and its GNU OpenMP pool
    import torch
    torch.set_num_threads(2)  # a parallel region even on a host of one CPU
    if kind == "torch-region":
        torch.ones(1 << 22).add_(1).sum()  # a region before the fork: its child hangs
    print(json.dumps(fs.fork_hazard()))
    sys.exit(0)

def ones(n):
    import os, signal, time
    if kind == "dies":
        os.kill(os.getpid(), signal.SIGABRT)
    if kind == "hangs":
        time.sleep(30)
    if kind == "raises":
        raise RuntimeError("no kernel")
    return types.SimpleNamespace(add_=lambda x: types.SimpleNamespace(sum=lambda: n))

cuda = types.SimpleNamespace(is_initialized=lambda: kind == "gpu")
if kind != "none":
    sys.modules["torch"] = types.SimpleNamespace(ones=ones, cuda=cuda)
if kind == "no-cuda":
    del sys.modules["torch"].cuda
print(json.dumps(fs.fork_hazard()))
"""


@pytest.mark.parametrize(("kind", "hazard"), [
    ("none", None),
    ("fine", None),
    ("no-cuda", None),
    ("raises", None),  # an exception is not the hang or crash the canary is for
    ("gpu", "torch initialised a GPU before the fork"),
    ("dies", f"a forked child's parallel kernel ended with {-signal.SIGABRT}"),
    ("hangs", "a forked child's parallel kernel hung past 1 s (an OpenMP region ran before "
              "the fork)"),
    ("torch-quiet", None),
    ("torch-region", "a forked child's parallel kernel hung past 1 s (an OpenMP region ran "
                     "before the fork)"),
])
def test_the_fork_hazards(tmp_path: Path, kind: str, hazard: str | None) -> None:
    script = tmp_path / "hazard.py"
    script.write_text(textwrap.dedent(HAZARD))
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(script), forkserver.__file__, kind],
                          capture_output=True, text=True, timeout=WAIT_S, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == hazard
    if kind.endswith(("hangs", "region")):  # killed at its deadline, not waited for
        assert time.monotonic() - started < 10


def _lines(*chunks: bytes) -> forkserver.Reply | None:
    left, right = socket.socketpair()

    def send() -> None:
        for chunk in chunks:
            with contextlib.suppress(OSError):  # the reader stops at its limit
                left.sendall(chunk)
        left.shutdown(socket.SHUT_WR)

    with left, right:
        sender = threading.Thread(target=send)
        sender.start()
        found = forkserver._recv_line(right)
        right.close()
        sender.join(WAIT_S)
        return found


def test_a_reply_line() -> None:
    assert _lines(b'{"pid": ', b"12}\n") == {"pid": 12}
    assert _lines(b'{"pid": 12}') is None  # closed before its end
    assert _lines(b"[12]\n") is None
    assert _lines(b"x" * (forkserver._MAX_HEADER + 1)) is None
    # a whole line: the limit is 4 MiB, an argv and environment of one request
    under = b'{"pid": 1, "pad": "' + b"x" * ((1 << 22) - 40) + b'"}\n'
    assert _lines(under) == {"pid": 1, "pad": "x" * ((1 << 22) - 40)}
    over = b'{"pid": 1, "pad": "' + b"x" * ((1 << 22) + 10) + b'"}\n'
    assert _lines(over) is None
    exact = b'{"pad": "' + b"x" * ((1 << 22) - 12) + b'"}\n'  # 4 MiB to the byte
    assert len(exact) == 1 << 22 and _lines(exact) == {"pad": "x" * ((1 << 22) - 12)}
    assert _lines(b"") is None


# -- the runner's side ----------------------------------------------------------------------


def test_which_suites_run_forked(scratch: Path, started: tuple[ForkServer, list[str]]) -> None:
    server, said = started
    env = server_env(scratch)
    pytest_inv = invocation(pytest_argv(scratch / "test_who.py"))
    assert ForkServer([]).argv_for(pytest_inv, env) == pytest_inv.argv  # nothing preloaded
    for inv in (invocation(pytest_argv(scratch / "test_who.py"), workers=2),
                invocation((sys.executable, "-c", "pass")),
                invocation((sys.executable, "-m", "other"))):
        assert server.argv_for(inv, env) == inv.argv
    assert server._proc is None and not said  # no server for any of those
    forked = server.argv_for(pytest_inv, env)
    assert forked == (sys.executable, str(SCRIPT), "run", str(server._socket), "--",
                      *pytest_inv.argv)
    assert server.argv_for(pytest_inv, env) == forked and len(said) == 1  # one server
    folder = Path(str(server._socket)).parent
    proc = server._proc
    assert proc is not None
    server.stop()
    assert proc.poll() is not None and not folder.exists()
    assert server._socket is None and server._proc is None


def test_a_server_that_ends_or_never_says_ready(scratch: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (scratch / "exits_engine.py").write_text("print('importing')\nimport os\nos._exit(3)\n")
    (scratch / "slow_engine.py").write_text("import time\ntime.sleep(60)\n")
    env = server_env(scratch)
    inv = invocation(pytest_argv(scratch / "test_who.py"))
    monkeypatch.setattr(runner_side, "_START_TIMEOUT_S", 2.0)
    for module, state in (("exits_engine", "ended with exit 3 while importing"),
                          ("slow_engine", "not ready after 2 s")):
        said: list[str] = []
        server = ForkServer([module], say=said.append)
        started = time.monotonic()
        assert server.argv_for(inv, env) == inv.argv
        assert server.state == state, server.state
        assert said == [f"harness: fork server {state}; the suites run in fresh processes"]
        assert server._proc is None and time.monotonic() - started < 30
    missing = invocation(("/nonexistent/python", "-m", "pytest"))
    server = ForkServer(["json"], say=lambda _: None)
    assert server.argv_for(missing, env) == missing.argv
    assert server.state.startswith("not started: ") and "/nonexistent/python" in server.state


def test_the_first_line_is_the_tagged_one_after_what_the_imports_logged(
        scratch: Path) -> None:
    with serving(scratch, "x.sock", "light_engine") as (_, line, _):
        assert line.startswith("ready: imported light_engine in ") and line.endswith(" s")
        assert not line.endswith("\n")



def test_a_one_word_command_and_a_server_with_nothing_to_import(scratch: Path) -> None:
    """``run SOCKET -- PROGRAM`` (the shortest command) and ``serve SOCKET`` (no module):
    both are requests the script takes, not a usage error."""
    done = subprocess.run([sys.executable, str(SCRIPT), "run", str(scratch / "absent.sock"),
                           "--", "/bin/true"], capture_output=True, text=True, timeout=WAIT_S,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "the server cannot be reached" in done.stderr
    with serving(scratch, "e.sock") as (_, line, _):
        assert line.startswith("ready: imported  in "), line
        took = float(line.removeprefix("ready: imported  in ").removesuffix(" s"))
        assert 0 <= took < 30


NOISY = """
import os, signal, sys

def late(*_):
    print("late-stdout", flush=True)
    print("late-stderr", file=sys.stderr, flush=True)
    os.write(1, b"late-fd1\\n")
    os.write(2, b"late-fd2\\n")

signal.signal(signal.SIGUSR1, late)
"""


def test_after_its_ready_line_the_server_writes_nothing_to_the_runners_pipes(
        scratch: Path) -> None:
    (scratch / "noisy_engine.py").write_text(textwrap.dedent(NOISY))
    with serving(scratch, "n.sock", "noisy_engine") as (serve, line, after):
        took = float(line.removeprefix("ready: imported noisy_engine in ").removesuffix(" s"))
        assert 0 <= took < 30, line
        time.sleep(0.5)  # past its ready line's print and into accept()
        serve.send_signal(signal.SIGUSR1)
        time.sleep(0.5)
    assert not any("late" in text for text in after), after


def test_a_child_that_raises_system_exit_ends_with_its_code(scratch: Path) -> None:
    """SystemExit out of pytest.main (a conftest that exits while pytest loads it): an int
    code is the child's exit, anything else is 1, as Python's own exit would have it."""
    said: list[str] = []
    server = ForkServer(["light_engine"], say=said.append)
    try:
        for code, want in (("3", 3), ('"leaving"', 1)):
            folder = scratch / f"exits{want}"
            folder.mkdir()
            (folder / "conftest.py").write_text(f"raise SystemExit({code})\n")
            (folder / "test_x.py").write_text("def test_x():\n    pass\n")
            argv = server.argv_for(invocation(pytest_argv(folder / "test_x.py")),
                                   server_env(scratch))
            done = subprocess.run(argv, cwd=folder, env=client_env(scratch),
                                  capture_output=True, text=True, timeout=WAIT_S, check=False)
            assert done.returncode == want, done.stdout + done.stderr
    finally:
        server.stop()
