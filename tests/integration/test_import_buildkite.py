"""``harness import buildkite`` on vLLM 0.32.0's own ``.buildkite/hardware_tests/cpu.yaml``,
read from its sdist (through pip, sha256-checked, cached under the harness download cache
by ci/vllm_upstream.py; nothing of vLLM is kept in this repository). The round trip: the
pytest argv harness plans for the imported suite is the step's own, less the runner
script and the shard flags."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from vllm_sources import source_tree

from harness import cli
from harness.matrix import load_matrix
from harness.run.plan import PlanOptions, plan_suite

pytestmark = pytest.mark.timeout(900)  # a cold cache downloads the sdist through pip

ROOT = Path(__file__).resolve().parents[2]
STEP_FILE = ".buildkite/hardware_tests/cpu.yaml"
SHARDS = ("--num-shards", "--shard-id")
OWN = ("--junitxml=", "--rootdir=", "--harness-", "--timeout=")


@pytest.fixture(scope="module")
def vllm_tree(shared_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return source_tree(tmp_path_factory.mktemp("vllm"))


def _step_argv(tree: Path, key: str) -> list[str]:
    """The step's pytest argv as its own command writes it (runner and shards left out)."""
    (step,) = [s for s in yaml.safe_load((tree / STEP_FILE).read_text())["steps"]
               if s.get("key") == key]
    inner = shlex.split(step["commands"][0].replace("\\\n", " "))[3]
    words = shlex.split(inner.replace("\\\n", " "))
    assert words[0] == "pytest"
    return [w for w in words[1:] if not w.startswith(SHARDS)]


def _planned_argv(matrix_file: Path, suite: str) -> tuple[list[str], Path]:
    matrix = load_matrix(str(matrix_file))
    inv = plan_suite(matrix, matrix.suites[suite], matrix_file.parent / "run", ROOT,
                     PlanOptions(python="python", platform_spec=str(matrix_file)))
    argv, kept = list(inv.argv[3:]), []
    while argv:
        word = argv.pop(0)
        if word in ("-p", "-o", "--platform"):
            argv.pop(0)
        elif not (word.startswith(OWN) or word in ("-q", "-ra")):
            kept.append(word)
    assert inv.rootdir is not None
    kept[0] = str(Path(kept[0]).relative_to(inv.rootdir))
    return kept, inv.rootdir


def test_cpu_kernel_tests_round_trip(vllm_tree: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "matrices" / "vllm-kernels.yaml"
    assert cli.main(["import", "buildkite", str(vllm_tree / STEP_FILE), "--step",
                     "cpu-kernel-tests", "--name", "vllm-kernels", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    planned, rootdir = _planned_argv(out, "cpu_kernel_tests")
    own = _step_argv(vllm_tree, "cpu-kernel-tests")
    files = [w for w in own if not w.startswith("-")]
    assert len({f.partition("::")[0] for f in files}) == 18
    assert sorted(planned) == sorted(own)
    assert [w for w in planned if w.startswith("-")] == [w for w in own if w.startswith("-")]
    assert rootdir == vllm_tree.resolve()
    matrix = load_matrix(str(out))
    assert matrix.suites["cpu_kernel_tests"].timeout_s == 1800  # the runner's 30m
    assert matrix.resolved["ci"]["shards"] == 2  # parallelism: 2
    text = out.read_text()
    assert "#   device: intel_cpu" in text and "source_file_dependency: csrc/cpu/" in text
    assert "step cpu-kernel-tests: device: no place in a matrix suite" in err
    assert "step cpu-kernel-tests: source_file_dependencies: no place" in err


def test_per_file_splits_the_step_and_keeps_every_target_and_flag(
        vllm_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--per-file: one suite per file of the step (a file that dies at collection, as
    test_cpu_fused_sampling.py does by SIGILL on a CPU without AVX-512, takes only its own
    suite); together they plan the step's own targets, each with the step's flags."""
    out = tmp_path / "matrices" / "per-file.yaml"
    assert cli.main(["import", "buildkite", str(vllm_tree / STEP_FILE), "--step",
                     "cpu-kernel-tests", "--per-file", "--name", "per-file", "--out",
                     str(out)]) == 0
    capsys.readouterr()
    own = _step_argv(vllm_tree, "cpu-kernel-tests")
    flags = [w for w in own if w.startswith("-")]
    matrix = load_matrix(str(out))
    assert len(matrix.suites) - len(load_matrix("vllm-cpu").suites) == 18
    targets = []
    for name in matrix.suites:
        if name in load_matrix("vllm-cpu").suites:
            continue
        planned, _ = _planned_argv(out, name)
        words = [w for w in planned if not w.startswith("-")]
        assert len({w.partition("::")[0] for w in words}) == 1, (name, words)
        assert [w for w in planned if w.startswith("-")] == flags
        targets += words
    assert sorted(targets) == sorted(w for w in own if not w.startswith("-"))
    assert "test_cpu_fused_sampling" in matrix.suites


def test_whole_file_maps_markers_ignores_soft_fail_and_names_the_rest(
        vllm_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "all.yaml"
    assert cli.main(["import", "buildkite", str(vllm_tree / STEP_FILE), "--name", "all",
                     "--out", str(out)]) == 0
    err = capsys.readouterr().err
    matrix = load_matrix(str(out))
    mm = matrix.suites["cpu_multi_modal_model_tests_n"]
    assert mm.markers == "cpu_model" and mm.timeout_s == 45 * 60
    assert "--ignore=tests/models/multimodal/generation/test_pixtral.py" in mm.pytest_args
    assert matrix.resolved["ci"]["shards"] == 4
    quarantined = [k for k in matrix.known_failures if k.action == "quarantine"]
    assert any(k.id.startswith("tests/v1/spec_decode/test_ngram.py") for k in quarantined)
    assert "spec-decode-tests: not a pytest command, not run: unset VLLM_CPU_CI_ENV" in err
    assert "qwen2-5-vl-multimodal-tests: env set inline, not kept: VLLM_CI_ENV=0" in err
    assert "cpu-distributed-tests-pp-tp: commands: no pytest command (not imported)" in err
    assert "arm-cpu-test: not a pytest command, not run: " in err


def test_the_imported_step_runs_in_both_providers_nightly_on_both_cpu_lanes(
        vllm_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A maintainer's project: the step imported once per CPU lane (the host's library and
    the AVX2 cap); the nightly pipeline of each provider runs both lanes."""
    project = tmp_path / "project"
    (project / "matrices").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "m"\nversion = "0"\n\n'
                                            "[tool.harness]\n")
    for lane, base in (("vllm-kernels", "vllm-cpu"), ("vllm-kernels-avx2", "vllm-cpu-avx2")):
        assert cli.main(["import", "buildkite", str(vllm_tree / STEP_FILE), "--step",
                         "cpu-kernel-tests", "--extends", base, "--name", lane, "--out",
                         str(project / "matrices" / f"{lane}.yaml")]) == 0
    capsys.readouterr()
    root = ["--root", str(project)]
    assert cli.main([*root, "ci", "pipeline", "--provider", "buildkite", "--nightly"]) == 0
    buildkite = capsys.readouterr().out
    for lane in ("vllm-kernels", "vllm-kernels-avx2"):
        assert f"harness run --matrix {lane} --shard 1/2" in buildkite
    assert cli.main([*root, "ci", "pipeline", "--provider", "github", "--nightly"]) == 0
    github = capsys.readouterr().out  # its select job runs `harness ci select --nightly`
    assert "--nightly --durations-dir" in github and "harness ci select $args" in github
    assert cli.main([*root, "ci", "select", "--nightly"]) == 0
    matrix_line = next(line for line in capsys.readouterr().out.splitlines()
                       if line.startswith("matrix="))
    lanes = {entry["lane"] for entry in yaml.safe_load(matrix_line[len("matrix="):])["include"]}
    assert {"vllm-kernels", "vllm-kernels-avx2"} <= lanes


def test_an_imported_lane_reads_its_parents_lane_data_on_its_first_night(
        vllm_tree: Path, tmp_path: Path, shared_cache: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The step imported over vllm-cpu and over vllm-cpu-v3 changes no lane fact: both read
    their parent's golden ids (``matrix lanes``: nothing missing), and the import's e2e is
    green on its first run, its ids recorded nowhere."""
    import os
    import subprocess
    import sys

    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    project = tmp_path / "project"
    (project / "matrices").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.harness]\n")
    for lane, base in (("vllm-kernels", "vllm-cpu"), ("vllm-kernels-v3", "vllm-cpu-v3")):
        assert cli.main(["import", "buildkite", str(vllm_tree / STEP_FILE), "--step",
                         "cpu-kernel-tests", "--only", "tests/kernels/test_onednn.py",
                         "--extends", base, "--name", lane, "--out",
                         str(project / "matrices" / f"{lane}.yaml")]) == 0
        assert load_matrix(lane, root=project).lane_data == (lane, base)
    capsys.readouterr()
    assert cli.main(["--root", str(project), "matrix", "lanes", "vllm-kernels",
                     "vllm-kernels-v3"]) == 0, capsys.readouterr().out
    env = {**os.environ, "HARNESS_ROOT": str(project)}
    for args in (("cache", "prime", "--matrix", "vllm-kernels"),
                 ("run", "--matrix", "vllm-kernels", "--suite", "e2e", "-k", "native")):
        done = subprocess.run([sys.executable, "-m", "harness", *args], cwd=project, env=env,
                              capture_output=True, text=True, timeout=900, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert not (project / "lane-data").exists()
    assert not (ROOT / "suites" / "e2e" / "golden" / "vllm-kernels.json").exists()
