"""Every fault keeps the results written before it, names its cause, leaves nothing behind."""

from __future__ import annotations

import _thread
import io
import signal
import subprocess
import textwrap
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import leftovers, tiny_matrix

from harness.results.outcome import Counts, Status
from harness.runners.docker import DockerRunner
from harness.runners.invocation import Invocation

SUITE = '''
import os, signal, sys, time, ctypes

def test_first():
    assert True

def test_second_fails():
    assert 1 == 2

def test_fault():
    {fault}

def test_after():
    pass
'''

FAULTS = {
    "segfault": "ctypes.string_at(0)",
    "abort": "os.abort()",
    "hang": "time.sleep(600)",
    "hang_ignoring_sigint": "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)",
    "oom": "x = [bytearray(32 << 20) for _ in range(64)]",
    "slow_test": "time.sleep(30)",
    "none": "pass",
}


def make_suite(run_dir: Path, fault: str, name: str = "faulty") -> Path:
    folder = run_dir / f"suite_{name}"
    folder.mkdir()
    (folder / f"test_{name}.py").write_text(textwrap.dedent(SUITE.format(fault=FAULTS[fault])))
    return folder


def invocation(run_dir: Path, folder: Path, *, name: str = "faulty", step_s: float = 120,
               test_s: int = 300) -> Invocation:
    junit = run_dir / "junit" / f"{name}.xml"
    partial = run_dir / "junit" / f"{name}.partial.jsonl"
    argv = ("python3", "-m", "pytest", str(folder), "-p", "harness.pytest_entry",
            f"--junitxml={junit}", f"--harness-partial={partial}", "-p", "no:cacheprovider",
            f"--timeout={test_s}", "-q", f"--rootdir={folder}")
    return Invocation(suite=name, argv=argv, env={}, junit=junit,
                      log=run_dir / "logs" / f"{name}.log", partial=partial, timeout_s=step_s,
                      workers=1)


def cases(junit: Path) -> dict[str, str]:
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        tags = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        found[case.get("name", "")] = tags[0] if tags else "passed"
    return found


def run(run_dir: Path, image: str, invs: list[Invocation], **runtime: Any) -> list[Any]:
    out = io.StringIO()
    runner = DockerRunner(tiny_matrix(**runtime), image=image, echo=out, run_id=run_dir.name,
                          cache_root=run_dir / "cache")
    with runner.started(run_dir, invs):
        outcomes = runner.run()
    assert leftovers(f"org.harness.run={run_dir.name}") == "", "a container was left behind"
    return outcomes


def test_plain_failure_is_failed_with_streamed_prefixed_log(tiny_image: str,
                                                            run_dir: Path) -> None:
    inv = invocation(run_dir, make_suite(run_dir, "none"))
    out = io.StringIO()
    runner = DockerRunner(tiny_matrix(), image=tiny_image, echo=out, run_id=run_dir.name,
                          cache_root=run_dir / "cache")
    with runner.started(run_dir, [inv]):
        [outcome] = runner.run()
    assert outcome.status is Status.FAILED
    assert outcome.counts == Counts(passed=3, failed=1)
    assert "[faulty] " in out.getvalue() and "1 failed, 3 passed" in out.getvalue()
    assert "1 failed, 3 passed" in inv.log.read_text()
    assert leftovers(f"org.harness.run={run_dir.name}") == ""


@pytest.mark.parametrize(("fault", "code", "word"), [("segfault", 139, "SIGSEGV"),
                                                     ("abort", 134, "SIGABRT")])
def test_interpreter_crash_keeps_results(tiny_image: str, run_dir: Path, fault: str, code: int,
                                         word: str) -> None:
    inv = invocation(run_dir, make_suite(run_dir, fault))
    [outcome] = run(run_dir, tiny_image, [inv])
    assert outcome.status is Status.CRASHED
    assert outcome.exit_code == code
    found = cases(inv.junit)
    assert found["test_first"] == "passed"
    assert found["test_second_fails"] == "failure"
    error = next(n for n in found if n.startswith("faulty: "))
    assert word in error and str(code) in error
    # the test that crashed is an error of its own, the one after it is listed as not run
    assert found["test_fault"] == "error" and found["test_after"] == "skipped"
    assert outcome.reason.endswith("::test_fault")


def test_hang_past_step_timeout(tiny_image: str, run_dir: Path) -> None:
    inv = invocation(run_dir, make_suite(run_dir, "hang"), step_s=6)
    [outcome] = run(run_dir, tiny_image, [inv])
    assert outcome.status is Status.TIMEOUT
    found = cases(inv.junit)
    # SIGINT first: pytest itself wrote its JUnit, with the earlier results in it.
    assert found["test_first"] == "passed"
    assert any("timeout" in n for n in found)
    assert "step timeout" in inv.log.read_text()


def test_hang_that_ignores_sigint_is_killed_and_salvaged(tiny_image: str,
                                                         run_dir: Path) -> None:
    inv = invocation(run_dir, make_suite(run_dir, "hang_ignoring_sigint"), step_s=6)
    second = invocation(run_dir, make_suite(run_dir, "none", "next"), name="next")
    outcome, after = run(run_dir, tiny_image, [inv, second])
    assert outcome.status is Status.TIMEOUT
    found = cases(inv.junit)
    assert found["test_first"] == "passed" and found["test_second_fails"] == "failure"
    assert any(n.startswith("faulty: timeout") for n in found)
    assert after.status is Status.FAILED  # ran on in a fresh container


def test_per_test_timeout_fails_only_that_test(tiny_image: str, run_dir: Path) -> None:
    inv = invocation(run_dir, make_suite(run_dir, "slow_test"), test_s=2)
    [outcome] = run(run_dir, tiny_image, [inv])
    assert outcome.status is Status.FAILED
    found = cases(inv.junit)
    assert found["test_fault"] == "failure" and found["test_after"] == "passed"


def test_oom_kill_under_mem_limit(tiny_image: str, run_dir: Path) -> None:
    inv = invocation(run_dir, make_suite(run_dir, "oom"))
    [outcome] = run(run_dir, tiny_image, [inv], mem_limit="256m")
    assert outcome.status is Status.CRASHED
    assert outcome.exit_code == 137
    assert "out-of-memory" in outcome.reason
    found = cases(inv.junit)
    assert found["test_first"] == "passed"
    assert any("137" in n for n in found)


def test_container_killed_from_outside(tiny_image: str, run_dir: Path) -> None:
    inv = invocation(run_dir, make_suite(run_dir, "hang"))
    second = invocation(run_dir, make_suite(run_dir, "none", "next"), name="next")

    def killer() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if inv.partial.is_file() and len(inv.partial.read_text().splitlines()) >= 2:
                ids = leftovers(f"org.harness.run={run_dir.name}").split()
                subprocess.run(["docker", "kill", *ids], capture_output=True, check=False)
                return
            time.sleep(0.2)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    outcome, after = run(run_dir, tiny_image, [inv, second])
    thread.join()
    assert outcome.status is Status.CRASHED
    assert "killed from outside" in outcome.reason
    found = cases(inv.junit)
    assert found["test_first"] == "passed"
    assert after.status is Status.FAILED


def test_ctrl_c_stops_and_keeps_results(tiny_image: str, run_dir: Path) -> None:
    # The press waits for the hanging test as long as the step may run (a loaded host can
    # take a minute to start the container and pytest): never a timeout in its place.
    inv = invocation(run_dir, make_suite(run_dir, "hang"), step_s=240)
    second = invocation(run_dir, make_suite(run_dir, "none", "next"), name="next")

    def press_ctrl_c() -> None:
        deadline = time.monotonic() + inv.timeout_s
        while time.monotonic() < deadline:
            if inv.partial.is_file() and len(inv.partial.read_text().splitlines()) >= 2:
                _thread.interrupt_main()
                return
            time.sleep(0.2)

    # A test session started in the background of a non-interactive shell (`cmd &`) has
    # SIGINT ignored, and then Python installs no KeyboardInterrupt for it: the press
    # would do nothing. Ctrl-C's own handler for the press, as in a terminal.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=press_ctrl_c, daemon=True).start()
        outcomes = run(run_dir, tiny_image, [inv, second])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert [o.status for o in outcomes] == [Status.INTERRUPTED]
    found = cases(inv.junit)
    assert found["test_first"] == "passed"
