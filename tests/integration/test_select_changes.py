"""`harness select --changed-since` on a temporary clone with real one-line changes.

The clone is this checkout's HEAD; each test commits one change there and asks what it
selects. The cpu lane's test ids are the ones pytest really collects in the clone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from scratch_repo import git

from harness.cli import main
from harness.select import select_changes
from harness.select.collect import collect

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("select") / "repo"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(repo)], check=True)
    git(repo, "config", "user.email", "select@test")
    git(repo, "config", "user.name", "select test")
    # the working tree as it is (uncommitted edits included), as the clone's HEAD
    for rel in git(ROOT, "ls-files", "-m", "-o", "--exclude-standard").splitlines():
        if (ROOT / rel).is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, repo / rel)
        else:
            (repo / rel).unlink(missing_ok=True)
    git(repo, "add", "-A")
    if git(repo, "status", "--porcelain"):
        git(repo, "commit", "-qm", "the working tree")
    return repo


@pytest.fixture(scope="module")
def cpu_ids(clone: Path) -> list[str]:
    from harness.matrix import load_matrix
    from harness.runners.suite_env import collection_env

    matrix = load_matrix("cpu", clone)
    suites = matrix.suites
    ids = collect(sys.executable, clone, "cpu", [suites[name] for name in
                                                 ("platform", "kernel_parity", "fusion", "e2e")],
                  env=collection_env(matrix, clone))
    assert len(ids) > 100
    return ids


def _change(repo: Path, path: str, old: str, new: str) -> None:
    file = repo / path
    text = file.read_text()
    assert text.count(old) == 1, f"{path}: {old!r} must occur once"
    file.write_text(text.replace(old, new))
    git(repo, "commit", "-qam", f"change {path}")


@pytest.fixture
def reset(clone: Path) -> Path:
    head = git(clone, "rev-parse", "HEAD").strip()
    yield clone
    git(clone, "reset", "-q", "--hard", head)


def test_a_provider_change_selects_its_parity_cases_and_the_e2e_runs_using_it(
        reset: Path, cpu_ids: list[str]) -> None:
    _change(reset, "refengine/providers/torch_provider.py",
            "    return F.silu(x[..., :d]) * x[..., d:]\n",
            "    return F.silu(x[..., :d]) * x[..., d:]  # one-line change\n")
    selection = select_changes(reset, "HEAD~1")
    assert selection.changed == ("refengine/providers/torch_provider.py",)
    cpu = selection.lanes["cpu"]
    assert not cpu.full
    chosen = [t for t in cpu_ids if cpu.selects(t)]
    parity = [t for t in cpu_ids if "::test_parity[" in t]
    torch_parity = [t for t in parity if t.endswith("-torch-cpu]")]
    assert torch_parity and set(torch_parity) <= set(chosen)
    assert not [t for t in parity if t in chosen and not t.endswith("-torch-cpu]")]
    e2e = {t.split("[", 1)[1] for t in chosen if "/e2e/" in t}
    # torch's own provider set, and cpu's platform set, which lists torch first
    assert e2e == {"torch-llama]", "torch-moe]", "platform-llama]", "platform-moe]"}
    assert "suites/kernel_parity/test_selection.py::test_selection_table" in chosen
    assert not [t for t in chosen if "/fusion/" in t or "/platform/" in t]
    # the lane that never lists torch still runs torch's parity cases (always tried)
    assert selection.lanes["cuda"].rules and not selection.lanes["cuda"].full
    assert not selection.everything and not selection.self_tests


def test_a_triton_kernel_file_selects_that_ops_cases_only(reset: Path,
                                                          cpu_ids: list[str]) -> None:
    _change(reset, "refengine/triton_kernels/activation.py", "import torch\n",
            "import torch  # one-line change\n")
    selection = select_changes(reset, "HEAD~1")
    cpu = selection.lanes["cpu"]
    chosen = [t for t in cpu_ids if cpu.selects(t)]
    assert {"suites/e2e/test_e2e.py::test_generate[triton-llama]",
            "suites/e2e/test_e2e.py::test_generate[triton-moe]"} <= set(chosen)
    parity = [t for t in chosen if "test_parity.py::" in t]
    assert parity and all("silu_and_mul" in t and "-triton-" in t for t in parity), parity
    # Provider-wide checks of triton (byte order) have no op in their id: kept, to be safe.
    rest = [t for t in chosen if "test_parity.py::" not in t and "test_e2e.py::" not in t]
    assert all("test_byte_order.py::" in t and "triton" in t for t in rest), rest
    cuda = selection.lanes["cuda"]
    assert cuda.selects("suites/kernel_parity/test_parity.py::"
                        "test_parity[silu_and_mul-2d-odd-bfloat16-triton-cuda]")
    assert not cuda.selects("suites/kernel_parity/test_parity.py::"
                            "test_parity[rms_norm-2d-odd-bfloat16-triton-cuda]")
    assert not cuda.selects("suites/kernel_parity/test_parity.py::"
                            "test_parity[silu_and_mul-2d-odd-bfloat16-torch-cuda]")


def test_a_matrix_change_selects_that_lane_and_the_lanes_extending_it(reset: Path) -> None:
    _change(reset, "matrices/cpu.yaml", "  shards: 2\n", "  shards: 3\n")
    selection = select_changes(reset, "HEAD~1")
    full = sorted(name for name, lane in selection.lanes.items() if lane.full)
    # zen, cpu-v3 and the vllm-cpu lanes extend cpu (vllm-cpu-avx2, -v2, -v3 and vllm-zen
    # through vllm-cpu)
    assert full == ["cpu", "cpu-v3", "vllm-cpu", "vllm-cpu-avx2", "vllm-cpu-v2", "vllm-cpu-v3",
                    "vllm-zen", "zen"]
    assert not any(lane.affected for name, lane in selection.lanes.items()
                   if name not in full)
    assert selection.lanes["zen"].reasons == (
        ("matrices/cpu.yaml", "its matrix extends matrices/cpu.yaml"),)


def test_an_unknown_file_selects_everything_and_says_why(
        reset: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _change(reset, "pyproject.toml", 'version = "0.1.0"\n', 'version = "0.1.1"\n')
    monkeypatch.setenv("HARNESS_ROOT", str(reset))
    assert main(["select", "--changed-since", "HEAD~1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "everything runs: pyproject.toml: no rule knows what this file affects" in out
    lanes = [line for line in out if line.startswith("lane ")]
    assert lanes and all(line.endswith(": all") for line in lanes)
    assert "    tests in tests" in out  # and the harness's own tests


def test_explain_names_the_changed_file_behind_each_rule(
        reset: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _change(reset, "refengine/providers/torch_provider.py",
            "    return F.silu(x[..., :d]) * x[..., d:]\n",
            "    return F.silu(x[..., :d]) * x[..., d:]  # one-line change\n")
    monkeypatch.setenv("HARNESS_ROOT", str(reset))
    assert main(["select", "--changed-since", "HEAD~1", "--matrices", "cpu", "--explain"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-3:] == ["lane cpu: part", "    tests running provider torch (every op)",
                        "      <- refengine/providers/torch_provider.py: provider torch's module"]


def test_a_bad_ref_is_one_line_exit_2(reset: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_ROOT", str(reset))
    assert main(["select", "--changed-since", "no-such-ref"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-ref" in err[0]


def _pipeline(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    import yaml

    assert main(["ci", "pipeline", *args]) == 0
    return dict(yaml.safe_load(capsys.readouterr().out))


def test_a_pr_pipeline_keeps_only_the_affected_lane(
        reset: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _change(reset, "matrices/cuda.yaml", "\ndescription: ", "\ndescription: (changed) ")
    monkeypatch.setenv("HARNESS_ROOT", str(reset))
    doc = _pipeline(capsys, "--provider", "buildkite", "--changed-since", "HEAD~1",
                    "--db", str(tmp_path / "none.sqlite"))
    text = str(doc)
    assert "--matrix cuda" in text and "--changed-since" in text
    assert not any(f"--matrix {m} " in text for m in ("cpu", "rocm", "xpu", "zen", "s390x"))
    # GitHub cannot upload a pipeline at run time: its PR workflow selects in a job, and a
    # --changed-since frozen at generation time is refused in one line
    assert main(["ci", "pipeline", "--provider", "github", "--changed-since", "HEAD~1"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "cannot be uploaded at run time" in line and "its select job diffs" in line


def test_a_pr_pipeline_for_a_docs_change_has_no_test_job(
        reset: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (reset / "docs" / "matrix.md").write_text((reset / "docs" / "matrix.md").read_text() + "\n")
    git(reset, "commit", "-qam", "docs")
    monkeypatch.setenv("HARNESS_ROOT", str(reset))
    doc = _pipeline(capsys, "--provider", "buildkite", "--changed-since", "HEAD~1",
                    "--db", str(tmp_path / "none.sqlite"))
    steps = doc["steps"]
    assert isinstance(steps, list) and [s["key"] for s in steps] == ["no-lanes"]
    assert "harness run" not in str(steps)  # one annotation, never `steps: []`


def test_run_changed_since_runs_only_the_selected_tests(reset: Path, tmp_path: Path) -> None:
    import json

    from harness.results.junit_read import read_junit

    _change(reset, "suites/platform/test_dtypes.py", "from __future__ import annotations\n",
            "from __future__ import annotations  # one-line change\n")
    env = dict(os.environ, HARNESS_ROOT=str(reset))
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--matrix", "cpu", "--python", "current",
         "--changed-since", "HEAD~1", "--reports", str(tmp_path)],
        cwd=reset, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cpu runs the affected tests of platform (selected by suites/platform/" \
           "test_dtypes.py)" in proc.stdout
    (run,) = (tmp_path / "cpu").iterdir()
    assert sorted(p.name for p in (run / "junit").glob("*.xml")) == ["platform.xml"]
    cases, _ = read_junit(run / "junit" / "platform.xml", lambda m: None)
    assert cases and {c.nodeid.split("::")[0] for c in cases} == {
        "suites/platform/test_dtypes.py"}
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["changed_since"] == git(reset, "rev-parse", "HEAD~1").strip()
    assert json.loads((run / "select.json").read_text())["lane"] == "cpu"


def test_run_changed_since_with_nothing_affected_runs_nothing(reset: Path,
                                                              tmp_path: Path) -> None:
    (reset / "docs" / "matrix.md").write_text((reset / "docs" / "matrix.md").read_text() + "\n")
    git(reset, "commit", "-qam", "docs")
    env = dict(os.environ, HARNESS_ROOT=str(reset))
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--matrix", "cpu", "--python", "current",
         "--changed-since", "HEAD~1", "--reports", str(tmp_path)],
        cwd=reset, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nothing on cpu is affected, nothing to run" in proc.stdout
    assert not (tmp_path / "cpu").exists()


def test_an_image_recipe_selects_its_lanes_docker_runs(reset: Path) -> None:
    recipe = reset / "images" / "rocm" / "Dockerfile"
    recipe.write_text(recipe.read_text() + "# one-line change\n")
    git(reset, "commit", "-qam", "rocm image")
    selection = select_changes(reset, "HEAD~1")
    full = {name: lane.docker for name, lane in selection.lanes.items() if lane.full}
    assert full == {"rocm": True, "rocm-mi355": True}  # mi355 inherits rocm's recipe
    assert not any(lane.affected for name, lane in selection.lanes.items() if name not in full)


def test_a_harness_change_runs_the_platform_suite_and_the_harness_tests(reset: Path) -> None:
    _change(reset, "harness/run/workflow.py", '"""``harness run`` as', '"""``harness run``, as')
    selection = select_changes(reset, "HEAD~1")
    for lane in selection.lanes.values():
        assert not lane.full and {r.path for r in lane.rules} == {"suites/platform"}
    assert {r.path for r in selection.self_tests} == {"tests"}


def test_a_branch_behind_its_target_selects_only_its_own_change(reset: Path) -> None:
    """The target moved on (an image recipe) after the branch left it: diffing against the
    target's tip would claim that change for the branch; the merge base does not."""
    base = git(reset, "rev-parse", "HEAD").strip()
    git(reset, "checkout", "-q", "-b", "target")
    _change(reset, "images/rocm/Dockerfile", "FROM ", "# the target's own change\nFROM ")
    git(reset, "checkout", "-q", "-B", "branch", base)
    _change(reset, "docs/select.md", "# Running", "# Running (edited)")
    try:
        selection = select_changes(reset, "target")
        assert selection.ref == base  # the merge base, not the target's tip
        assert selection.changed == ("docs/select.md",)
        rocm = selection.lanes["rocm"]
        assert not (rocm.affected and rocm.docker)
        tip = select_changes(reset, git(reset, "rev-parse", "target").strip() + "~0")
        assert tip.ref == base
    finally:
        git(reset, "checkout", "-q", "--detach", base)
