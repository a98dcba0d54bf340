"""``harness repro`` end to end: real runs of a suite with one deliberate failure
(tests/data/suites/repro/check_repro.py: ``test_dtype[float16]`` fails), then repros
of their run folders and JUnit files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.roots import project_root

ROOT = project_root()
FIXTURE = "tests/data/suites/repro/check_repro.py"
FAILING = f"{FIXTURE}::test_dtype[float16]"


def harness(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )


def write_matrix(folder: Path, name: str, extends: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        f"extends: {extends}\n"
        "suites:\n"
        f"  repro: {{path: {FIXTURE}, workers: 1, timeout_s: 300, enabled: true}}\n"
    )
    return path


def new_run(reports: Path, matrix: str) -> Path:
    (run_dir,) = (reports / matrix).iterdir()
    return run_dir


def cases(junit: Path) -> list[tuple[str, str]]:
    return [(c.get("classname", ""), c.get("name", ""))
            for c in ET.parse(junit).getroot().iter("testcase")]


def suite_props(junit: Path) -> dict[str, str]:
    return {p.get("name", ""): p.get("value", "")
            for p in ET.parse(junit).getroot().iter("property")}


def make_run(folder: Path, name: str, extends: str, *extra: str) -> Path:
    matrix = write_matrix(folder, name, extends)
    done = harness("run", "--matrix", str(matrix), "--suite", "repro", "--python", "current",
                   "--reports", str(folder / "reports"), *extra)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    return new_run(folder / "reports", name)


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield make_run(tmp_path_factory.mktemp("cpu"), "repro-cpu", "cpu.yaml")


def test_repro_reruns_exactly_the_failed_test(cpu_run: Path, tmp_path: Path) -> None:
    done = harness("repro", str(cpu_run), "--python", "current", "--reports", str(tmp_path))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"repro: 1 test(s) from run {cpu_run.name}: {FAILING}" in done.stdout
    rerun = new_run(tmp_path, "repro-cpu")
    assert cases(rerun / "junit" / "repro.xml") == [
        ("tests.data.suites.repro.check_repro", "test_dtype[float16]")
    ]
    old = json.loads((cpu_run / "manifest.json").read_text())
    new = json.loads((rerun / "manifest.json").read_text())
    assert new["repro_of"] == old["run_id"] and old["repro_of"] is None
    assert new["matrix"]["hash"] == old["matrix"]["hash"]
    assert (new["seed"], new["emulate"], new["runner"]) == (old["seed"], False, "local")
    assert new["env"]["OMP_NUM_THREADS"] == old["env"]["OMP_NUM_THREADS"]
    assert new["status"] == "failed" and new["exit_code"] == 1
    assert (rerun / "matrix.json").read_text() == (cpu_run / "matrix.json").read_text()


def test_dry_run_prints_the_command_with_the_node_id(cpu_run: Path, tmp_path: Path) -> None:
    for target in (cpu_run, cpu_run / "junit" / "repro.xml", cpu_run / "merged.xml"):
        done = harness("repro", str(target), "--dry-run", "--python", "current",
                       "--reports", str(tmp_path))
        assert done.returncode == 0, done.stderr
        (command,) = [line for line in done.stdout.splitlines() if line.startswith("[repro]")]
        assert f"'{ROOT / FAILING}'" in command and f" {ROOT / FIXTURE} " not in command
        assert f"--platform {cpu_run / 'matrix.json'}" in command
        assert "--harness-seed=0" in command
    assert not any(tmp_path.iterdir())


def test_a_run_folder_from_before_the_newer_fields_reproduces(cpu_run: Path,
                                                               tmp_path: Path) -> None:
    """Data an earlier harness wrote: a manifest without the fields issues 38-41 and 47
    added (a suite's own thread count, its peak memory and peak test, the cause of its end,
    the host's agent CPU and the settings an emulated CPU left out) is reproduced as one
    that has them, the suite on the run's thread settings."""
    copy = tmp_path / "old" / cpu_run.name
    shutil.copytree(cpu_run, copy)
    data = json.loads((copy / "manifest.json").read_text())
    for suite in data["suites"]:
        for key in ("threads", "peak_rss_mb", "peak_test", "cause"):
            suite.pop(key, None)
    for key in ("agent_cpu", "cpu_emulated", "agent_env_left_out"):
        data["host"].pop(key, None)
    (copy / "manifest.json").write_text(json.dumps(data))
    done = harness("repro", str(copy), "--python", "current", "--reports",
                   str(tmp_path / "again"))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"repro: 1 test(s) from run {cpu_run.name}: {FAILING}" in done.stdout
    rerun = json.loads((new_run(tmp_path / "again", "repro-cpu") / "manifest.json").read_text())
    assert rerun["env"]["OMP_NUM_THREADS"] == data["env"]["OMP_NUM_THREADS"]
    assert rerun["suites"][0]["counts"]["failed"] == 1


def test_a_loose_junit_file_finds_its_matrix_from_the_suite_properties(
    cpu_run: Path, tmp_path: Path
) -> None:
    loose = tmp_path / "artifact" / "repro.xml"  # no run folder, no partial file beside it
    loose.parent.mkdir()
    shutil.copy(cpu_run / "junit" / "repro.xml", loose)
    done = harness("repro", str(loose), "--python", "current", "--reports", str(tmp_path))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert FAILING in done.stdout  # rebuilt: classname split at a test file of this checkout
    rerun = new_run(tmp_path, "repro-cpu")
    assert [name for _, name in cases(rerun / "junit" / "repro.xml")] == ["test_dtype[float16]"]


def test_test_option_picks_by_substring_and_a_clean_run_has_nothing_to_rerun(
    cpu_run: Path, tmp_path: Path
) -> None:
    done = harness("repro", str(cpu_run), "--test", "test_seeded", "--test", "passes",
                   "--python", "current", "--reports", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    rerun = new_run(tmp_path, "repro-cpu")
    assert sorted(name for _, name in cases(rerun / "junit" / "repro.xml")) == [
        "test_passes", "test_seeded"]
    again = harness("repro", str(rerun), "--python", "current", "--reports", str(tmp_path))
    assert again.returncode == 0
    assert f"run {rerun.name} has no failed tests; nothing to rerun" in again.stdout
    missing = harness("repro", str(cpu_run), "--test", "no_such_test", "--dry-run")
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        "harness: error: --test no_such_test: matches none of the run's tests")


def test_changed_matrix_is_reported_and_the_recorded_one_is_used(
    cpu_run: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "run"
    shutil.copytree(cpu_run, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    edited = tmp_path / "repro-cpu.yaml"  # the matrix file, edited since the run
    edited.write_text(
        Path(manifest["matrix"]["file"]).read_text() + "description: edited after the run\n"
    )
    manifest["matrix"]["file"] = str(edited)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    done = harness("repro", str(copy), "--dry-run", "--python", "current",
                   "--reports", str(tmp_path / "reports"))
    assert done.returncode == 0, done.stderr
    from harness.matrix import load_matrix

    now = load_matrix(edited).hash
    assert now != manifest["matrix"]["hash"]
    assert (f"harness repro: matrix repro-cpu changed since run {manifest['run_id']} "
            f"(hash {manifest['matrix']['hash'][:12]} -> {now[:12]}); using the recorded matrix"
            ) in done.stdout
    assert f"--platform {copy / 'matrix.json'}" in done.stdout


def test_rocm_emulated_run_repro_runs_on_the_cpu(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "repro-rocm", "rocm.yaml", "--emulate")
    done = harness("repro", str(run_dir), "--python", "current",
                   "--reports", str(tmp_path / "again"))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert "runner local" in done.stdout
    again = new_run(tmp_path / "again", "repro-rocm")
    junit = again / "junit" / "repro.xml"
    assert [name for _, name in cases(junit)] == ["test_dtype[float16]"]
    props = suite_props(junit)
    assert (props["matrix"], props["emulate"]) == ("repro-rocm", "true")
    assert json.loads((again / "manifest.json").read_text())["runner"] == "local"

    # The same run as the GPU agent would have recorded it (in its container, on the
    # device): a plain repro goes back to docker, --emulate brings it to this CPU.
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.update(emulate=False, runner="docker", image="harness/rocm:0123abcd")
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    plain = harness("repro", str(run_dir), "--dry-run", "--python", "current")
    assert plain.returncode == 0, plain.stderr
    assert "runner docker" in plain.stdout and "used image harness/rocm:0123abcd" in plain.stdout
    assert " --emulate" not in plain.stdout
    emulated = harness("repro", str(run_dir), "--emulate", "--dry-run", "--python", "current")
    assert emulated.returncode == 0, emulated.stderr
    assert "emulated on the CPU" in emulated.stdout and "runner local" in emulated.stdout
    (command,) = [line for line in emulated.stdout.splitlines() if line.startswith("[repro]")]
    assert command.endswith("--emulate") or " --emulate " in command
    assert FAILING in command


def test_bad_targets_are_one_line_exit_2(tmp_path: Path) -> None:
    missing = harness("repro", str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        f"harness: error: {tmp_path / 'nope'}: no such run folder or JUnit file")
    empty = harness("repro", str(tmp_path))
    assert empty.returncode == 2
    assert empty.stderr.strip() == (
        f"harness: error: {tmp_path}: not a run folder (no manifest.json)")
    foreign = tmp_path / "other.xml"
    foreign.write_text('<testsuite name="x"><testcase classname="a" name="b"/></testsuite>')
    done = harness("repro", str(foreign))
    assert done.returncode == 2 and "was not written by a harness run" in done.stderr
    assert "Traceback" not in done.stderr
