"""harness bisect --slower-than for real: a scratch git repository of this project with one
commit that makes the torch provider's silu_and_mul twice the work (its result unchanged),
found on speed by --commits; the line a test that records no speed gets; and --pins over a
made-up engine's releases (tiny wheels built here, as tests/integration/test_bisect_gaps.py
builds them) whose one test records the ratio each release names, the boundary exact.

Measured on the 2-core development machine (each a ``harness run --test`` of the speed-tier
case, quiet and beside one or two busy cores): the case's ratio 0.78-0.81 before the
commit, 1.52-1.62 after it (1.9-2.1x), against the 1.5x the bisect asks for."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from scratch_repo import bisect, commit, copy_project, git, wheel

ROOT = Path(__file__).resolve().parents[2]
PARITY = "suites/kernel_parity/test_parity.py::test_parity"
SMOKE = f"{PARITY}[silu_and_mul-2d-odd-float32-torch-cpu]"  # the speed tier's case
KERNEL = "refengine/providers/torch_provider.py"
GOOD_LINE = "    return F.silu(x[..., :d]) * x[..., d:]\n"
SLOW_LINES = ("    F.silu(x[..., :d]) * x[..., d:]  # the same result again, discarded\n"
              + GOOD_LINE)
_SPEED = re.compile(r"speed (?P<ratio>[\d.e-]+) \(reference (?P<reference>[\d.e-]+)\)")




@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """This project in a new repository: a good commit, a harmless one, the one that makes
    silu_and_mul in the torch provider do its work twice, and one more harmless."""
    repo = tmp_path_factory.mktemp("engine") / "engine"
    copy_project(repo)
    shas = [commit(repo, "good")]
    kernel = repo / KERNEL
    assert kernel.read_text().count(GOOD_LINE) == 1
    (repo / "NOTES").write_text("note 1\n")
    shas.append(commit(repo, "step 1"))
    kernel.write_text(kernel.read_text().replace(GOOD_LINE, SLOW_LINES))
    shas.append(commit(repo, "silu_and_mul: twice the work"))
    (repo / "NOTES").write_text("note 2\n")
    shas.append(commit(repo, "step 2"))
    return repo, shas


def _bisect(tmp_path: Path, test: str, *args: str) -> subprocess.CompletedProcess[str]:
    return bisect(tmp_path / "r", test, *args)


def test_slower_than_finds_the_commit_that_slowed_the_kernel(
        scratch: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, shas = scratch
    done = _bisect(tmp_path, SMOKE, "--commits", f"{shas[0]}..{shas[-1]}", "--repo", str(repo),
                   "--slower-than", "1.5")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("harness: bisect:")]
    assert lines[-1] == (f"harness: bisect: first bad commit: {shas[2][:7]} "
                         "silu_and_mul: twice the work"), done.stdout
    steps = {line.split()[3]: line for line in lines[:-1]}
    speeds = {sha: _SPEED.search(line) for sha, line in steps.items()}
    assert all(speeds.values()), lines  # every step judged on its speed, shown
    good, bad = speeds[shas[0][:7]], speeds[shas[2][:7]]
    assert good is not None and bad is not None
    assert good["ratio"] == good["reference"]  # the GOOD end is the reference
    assert {m["reference"] for m in speeds.values() if m} == {good["reference"]}
    assert float(bad["ratio"]) >= 1.5 * float(good["reference"]), lines
    assert steps[shas[0][:7]].split()[2] == "good" and steps[shas[2][:7]].split()[2] == "bad"
    assert git(repo, "worktree", "list").count("\n") == 1  # the probe trees are gone


@pytest.mark.parametrize(("test", "why"), [
    (f"{PARITY}[silu_and_mul-2d-odd-float32-triton-cpu]",
     "(speed_skipped: Triton runs in its interpreter here"),
    (f"{PARITY}[silu_and_mul-contiguous-1d-one-tile-odd-float32-torch-cpu]",
     "(it records none"),
])
def test_slower_than_on_a_test_that_records_no_speed_is_one_line(
        scratch: tuple[Path, list[str]], tmp_path: Path, test: str, why: str) -> None:
    """A Triton case (interpreted on the CPU: speed_skipped) and a case outside the speed
    tier (no speed at all): bad input, exit 2, the GOOD end's step taken away."""
    repo, shas = scratch
    done = _bisect(tmp_path, test, "--commits", f"{shas[0]}..{shas[-1]}", "--repo", str(repo),
                   "--slower-than", "1.5")
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-2000:]
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert done.stderr.startswith(
        "harness: error: --slower-than: bisect on speed where no case records one: "
        f"{test} recorded no speed at {shas[0][:7]} good {why}"), done.stderr
    assert not (tmp_path / "r").exists()
    assert git(repo, "worktree", "list").count("\n") == 1


# -- --pins -------------------------------------------------------------------------------

PACKAGE = "harness-bisect-speed-fixture-engine"
MODULE = PACKAGE.replace("-", "_")
# Each release's ratio: 1.2 is exactly 1.5 x 1.0's 0.8 (0.8 * 1.5 is 1.2000000000000002 in
# floating point: still the boundary, bad).
RELEASES = {"1.0": "0.8", "1.1": "1.19", "1.2": "1.2", "1.3": "2.4"}
PIN_TEST = f"""import {MODULE} as engine


def test_engine(record_property):
    record_property({{key!r}}, {{value}})
"""
PIN_MATRIX = """extends: cpu
description: a made-up engine's one test, which records a speed
python: {{requirements: ["{package}==1.0"]}}
caches: {{root: "{cache}"}}
suites:
  mine: {{path: checks, workers: 1, timeout_s: 600}}
"""



@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The wheels, a scratch project (a ``[tool.harness]`` pyproject, one matrix, one test
    folder) and an environment that finds the wheels; the pins' environments are built
    once, under the module's cache, and shared by its tests."""
    top = tmp_path_factory.mktemp("releases")
    wheels, project = top / "wheels", top / "project"
    wheels.mkdir()
    for version, ratio in RELEASES.items():
        wheel(wheels, PACKAGE, version, f"RATIO = {ratio!r}\n")
    (project / "matrices").mkdir(parents=True)
    (project / "checks").mkdir()
    (project / "pyproject.toml").write_text("[tool.harness]\n")
    (project / "matrices" / "mine.yaml").write_text(
        PIN_MATRIX.format(package=PACKAGE, cache=top / "cache"))
    env = dict(os.environ, PIP_FIND_LINKS=" ".join(
        filter(None, [str(wheels), os.environ.get("PIP_FIND_LINKS")])))
    return project, env


def _pins(releases: tuple[Path, dict[str, str]], key: str, value: str
          ) -> subprocess.CompletedProcess[str]:
    project, env = releases
    (project / "checks" / "test_engine.py").write_text(PIN_TEST.format(key=key, value=value))
    versions = ",".join(RELEASES)
    return subprocess.run(
        [sys.executable, "-m", "harness", "--root", str(project), "bisect", "--matrix", "mine",
         "--test", "checks/test_engine.py::test_engine", "--reports", str(project / "r"),
         "--pins", f"{PACKAGE}=={versions}", "--slower-than", "1.5x"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_pins_on_speed_find_the_first_release_at_the_factor(
        releases: tuple[Path, dict[str, str]]) -> None:
    done = _pins(releases, "speed_ratio", "engine.RATIO")
    out = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, out
    lines = [line for line in done.stdout.splitlines() if line.startswith("harness: bisect:")]
    pin = {v: f"{PACKAGE}=={v}" for v in RELEASES}
    assert lines == [
        f"harness: bisect: good  {pin['1.0']}: passed, speed 0.80 (reference 0.80)",
        f"harness: bisect: good  {pin['1.1']}: passed, speed 1.19 (reference 0.80)",
        f"harness: bisect: bad   {pin['1.2']}: passed, speed 1.20 (reference 0.80)",
        f"harness: bisect: bad   {pin['1.3']}: passed, speed 2.40 (reference 0.80)",
        f"harness: bisect: first bad release: {pin['1.2']} (after {pin['1.1']}, good)",
    ], out
    assert "on speed (bad at 1.5x the GOOD end's ratio or slower)" in done.stdout


def test_pins_on_speed_where_the_first_release_records_none_is_one_line(
        releases: tuple[Path, dict[str, str]]) -> None:
    project, _ = releases
    before = sorted((project / "r").glob("bisect/*"))  # another test's bisect may be there
    done = _pins(releases, "speed_skipped", "'no clock here'")
    assert done.returncode == 2, done.stdout[-4000:] + done.stderr[-2000:]
    assert done.stderr == (
        "harness: error: --slower-than: bisect on speed where no case records one: "
        f"checks/test_engine.py::test_engine recorded no speed at {PACKAGE}==1.0 "
        "(speed_skipped: no clock here)\n")
    assert sorted((project / "r").glob("bisect/*")) == before
