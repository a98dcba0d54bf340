"""``harness repro`` on a run folder someone changed (a downloaded CI artifact): each
untrusted case is refused with one line, ``--trust-run-folder`` accepts it. The folder
is one `harness run` wrote (tests/data/suites/repro), then edited the way an attacker
would, hash included."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.matrix import load_matrix
from harness.results.sidecar import address
from harness.roots import project_root

ROOT = project_root()
FIXTURE = "tests/data/suites/repro/check_repro.py"
FAILING = f"{FIXTURE}::test_dtype[float16]"


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def made_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("trust")
    matrix = folder / "repro-trust.yaml"
    matrix.write_text("extends: cpu.yaml\nsuites:\n"
                      f"  repro: {{path: {FIXTURE}, workers: 1, timeout_s: 300, enabled: true}}\n")
    done = harness("run", "--matrix", str(matrix), "--suite", "repro", "--python", "current",
                   "--reports", str(folder / "reports"))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    (run_dir,) = (folder / "reports" / "repro-trust").iterdir()
    return run_dir


@pytest.fixture
def run_copy(made_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(made_run, tmp_path / made_run.name))


def edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def tamper_matrix(run_dir: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Change matrix.json and, as an attacker would, the manifest's hash to match."""
    edit_json(run_dir / "matrix.json", change)
    new_hash = load_matrix(run_dir / "matrix.json").hash
    edit_json(run_dir / "manifest.json", lambda m: m["matrix"].update(hash=new_hash))


def repro(run_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return harness("repro", str(run_dir), "--dry-run", "--python", "current", *extra)


def refused(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    return done.stderr.strip().splitlines()


def test_an_untouched_run_folder_repros(run_copy: Path) -> None:
    done = repro(run_copy)
    assert done.returncode == 0, done.stderr
    assert "harness repro: would set OMP_NUM_THREADS=" in done.stdout


def test_a_matrix_json_changed_without_its_hash_is_refused(run_copy: Path) -> None:
    edit_json(run_copy / "matrix.json", lambda m: m["runtime"].update(step_timeout_s=7))
    (line,) = refused(repro(run_copy))
    assert "the manifest records" in line and "run folder was changed" in line
    assert "--trust-run-folder" in line


@pytest.mark.parametrize(("change", "says"), [
    (lambda m: m["runtime"].update(cap_add=["SYS_ADMIN"]), "runtime.cap_add ['SYS_ADMIN']"),
    (lambda m: m["runtime"].update(devices=["/dev/mem"]), "runtime.devices ['/dev/mem']"),
    (lambda m: m["runtime"].update(security_opt=["seccomp=unconfined"]),
     "runtime.security_opt ['seccomp=unconfined']"),
    (lambda m: m["runtime"].update(network="host"), "runtime.network 'host'"),
    (lambda m: m["runtime"].update(ipc="host"), "runtime.ipc 'host'"),
    (lambda m: m["caches"].update(root="/etc"), "caches.root '/etc'"),
    (lambda m: m["runtime"]["env"].update(LD_PRELOAD="/tmp/x.so"), "runtime.env sets LD_PRELOAD"),
    (lambda m: m["python"]["requirements"].append("./evil"), "'./evil' is not a plain pin"),
    (lambda m: m["python"]["requirements"].append("--index-url=http://x"), "not a plain pin"),
])
def test_what_the_current_matrix_does_not_allow_is_refused_with_one_line(
    run_copy: Path, change: Callable[[dict[str, Any]], None], says: str
) -> None:
    tamper_matrix(run_copy, change)
    (line,) = refused(repro(run_copy))
    assert line.startswith(f"harness: error: {run_copy / 'matrix.json'}: ") and says in line
    trusted = repro(run_copy, "--trust-run-folder")
    assert trusted.returncode == 0, trusted.stderr
    assert "accepted by --trust-run-folder" in trusted.stdout
    assert "+" in trusted.stdout and "changed since run" in trusted.stdout  # the diff


def test_a_node_id_outside_the_checkout_is_refused(run_copy: Path) -> None:
    evil = run_copy / "evil.py"
    evil.write_text("def test_x():\n    open('/tmp/pwned', 'w')\n")
    # as an attacker would: the sidecar's node id, and the JUnit case's address that joins
    # it (else the case keeps the id rebuilt from its own attributes, the failing test)
    was, now = address(FAILING), address(f"{evil}::test_x")
    for path in (run_copy / "junit").iterdir():
        text = path.read_text().replace(FAILING, f"{evil}::test_x")
        path.write_text(text.replace(f'classname="{was[0]}" name="{was[1]}"',
                                     f'classname="{now[0]}" name="{now[1]}"'))
    lines = refused(repro(run_copy))
    assert lines == [f"harness: error: {evil}::test_x: its file lies outside this checkout; "
                     "refused"]


def test_only_seed_and_thread_settings_come_back_from_the_env(run_copy: Path) -> None:
    edit_json(run_copy / "manifest.json", lambda m: m["env"].update(
        PYTEST_ADDOPTS="-k test_passes", LD_PRELOAD="/tmp/x.so"))
    done = repro(run_copy)
    assert done.returncode == 0, done.stderr
    assert ("harness repro: not restored (not seed or thread settings): LD_PRELOAD, "
            "PYTEST_ADDOPTS (--trust-run-folder restores them)") in done.stdout
    assert "would set LD_PRELOAD" not in done.stdout
    trusted = repro(run_copy, "--trust-run-folder")
    assert "would set LD_PRELOAD=/tmp/x.so" in trusted.stdout
