"""``harness repro --standalone``'s steps (harness/repro/standalone_main.py, standalone.py):
asking a suite's hook for the script (a real ``python -m harness.repro.standalone_hook``
subprocess), running the script to see its signature, refusing a case that passes or
cannot run, minimizing, writing the file. The suite here is a user's whose hook writes
scripts of plain Python (no torch: well under a second a script), so every step's side is
walked in seconds; test_byo_standalone.py and test_standalone.py walk the command with
torch and the shipped suites."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from runs import harness as harness_command
from runs import named_run_folder

from harness.errors import InfraError, UsageError
from harness.matrix.loader import load_matrix
from harness.repro.standalone import (
    NothingToReproduce,
    Setup,
    a_finding,
    ask,
    case_name,
    describe_signature,
    observe_text,
    script_env,
    write_text,
)
from harness.repro.standalone_main import make_standalone

ROOT = Path(__file__).resolve().parents[2]
# The hook writes, for each test of the suite, a script that prints what it sees: a
# mismatch while the case has 3 rows or more (9 as built), an exception below; test_pass
# passes, test_cannot cannot run, test_silent prints no signature; test_flaky shows the
# mismatch at any size the first time and an exception at a shrunk size the second time.
# The expected signature and the sizes it was given are written in.
HOOKS = '''
import json

SCRIPT = """import json, os, sys
EXPECTED = json.loads({expected!r})
ROWS = {rows}
NAME = {name!r}
FLAKY = {flaky!r}
if NAME == "test_pass":
    seen = {{"kind": "", "headroom": 0.25}}
elif NAME == "test_cannot":
    seen = {{"kind": "cannot_run", "detail": "no kernel library"}}
elif NAME == "test_silent":
    sys.stderr.write("first\\\\nboom at the end\\\\n")
    sys.exit(3)
elif NAME == "test_env":
    seen = {{"kind": "exception", "type": "E", "message": os.environ.get("PYTHONPATH", "-")
            + " " + os.getcwd()}}
elif NAME == "test_flaky" and ROWS < 9 and os.path.exists(f"{{FLAKY}}-{{ROWS}}"):
    seen = {{"kind": "exception", "type": "E", "message": "the second time"}}
elif ROWS >= 3 or NAME == "test_flaky":
    if NAME == "test_flaky":
        open(f"{{FLAKY}}-{{ROWS}}", "w").close()
    seen = {{"kind": "mismatch", "max_abs_err": ROWS * 1.5, "max_rel_err": 0.5,
             "headroom": ROWS * 2.0}}
else:
    seen = {{"kind": "exception", "type": "IndexError", "message": "rows " + str(ROWS)}}
if "--json" in sys.argv:
    print("SIGNATURE " + json.dumps(seen))
sys.exit(0 if not seen["kind"] else 1 if seen["kind"] == EXPECTED.get("kind") else 2)
"""


def standalone(test_id, request):
    name = test_id.rsplit("::", 1)[-1]
    if name == "test_refused":
        raise ValueError("test_refused has no script here")
    if name == "test_broken":
        raise RuntimeError("the hook itself broke")
    if name == "test_quiet":
        return {"text": SCRIPT.format(expected="{}", rows=9, name=name, flaky="")}
    rows = request.shrink.get("rows", 9)
    if name == "test_chatty":
        print("the hook says something first")
    text = ("# " + request.shrunk + " " + json.dumps(request.pins) + " " + request.origin
            + " seed " + str(request.seed) + "\\n"
            + SCRIPT.format(expected=json.dumps(request.expected), rows=rows, name=name,
                            flaky=str(request.root / "flaky")))
    return {"text": text, "sizes": {"rows": 9}, "steps": {"rows": 1}, "timeout_s": 60}
'''
MATRIX = """extends: cpu
description: a user's suite with a standalone hook
python: {requirements: ["eng==1.0"]}
runtime: {env: {MY_FLAG: "1"}}
suites:
  kernel_parity: {enabled: false}
  mine: {path: mine, workers: 1}
"""
GPU_MATRIX = """extends: cuda
description: the same suite under the cuda profile
suites:
  kernel_parity: {enabled: false}
  mine: {path: mine, workers: 1}
"""
TEST = "mine/test_x.py::{}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "mine").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[tool.harness]\n")
    (root / "mine" / "test_x.py").write_text("def test_find():\n    pass\n")
    (root / "mine" / "harness_suite.py").write_text(HOOKS)
    (root / "mine.yaml").write_text(MATRIX)
    (root / "gpu.yaml").write_text(GPU_MATRIX)
    return root


def _run(root: Path, matrix: str, *args: str) -> Path:
    """A real ``harness run`` of the case; its run folder."""
    done = harness_command("run", "--matrix", str(root / matrix), "--test",
                           TEST.format("test_find"), "--python", "current", "--reports",
                           str(root / "r"), *args, cwd=root)
    assert "run folder: " in done.stdout, done.stdout + done.stderr
    return named_run_folder(done.stdout)


def _setup(root: Path, python: str = sys.executable) -> Setup:
    return Setup(python=python, root=root, matrix=load_matrix(str(root / "mine.yaml"), root),
                 seed=0, origin="matrix mine (seed 0)", import_root=ROOT)


def _make(root: Path, name: str, out: Path, *, minimize: bool = False) -> int:
    return make_standalone(root=root, target=None, matrix_name=str(root / "mine.yaml"),
                           tests=[TEST.format(name)], out=out, minimize=minimize,
                           budget_s=120, python="current", trust=False,
                           import_root=lambda _matrix: ROOT)


def test_the_script_is_written_with_the_signature_seen_as_expected(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "repro.py"
    assert _make(project, "test_find", out) == 0
    said = capsys.readouterr().out
    assert "building test_find in mine's environment" in said
    assert "seen here: mismatch: max abs err 13.5, max rel err 0.5, headroom 18" in said
    assert f"wrote {out}: python {out} exits 1 while the finding is there" in said
    text = out.read_text()
    assert '"kind": "mismatch"' in text and '["eng==1.0"]' in text
    assert text.splitlines()[0] == '#  ["eng==1.0"] matrix mine (seed 0) seed 0'
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert observe_text(_setup(project), text)["kind"] == "mismatch"


def test_minimize_shrinks_while_it_fails_the_same_way(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "small.py"
    assert _make(project, "test_find", out, minimize=True) == 0
    said = capsys.readouterr().out
    assert "minimize: rows 2: exception: IndexError: rows 2 (not the finding)" in said
    assert "minimized: rows 9 -> 3 in " in said
    assert "seen: mismatch: max abs err 4.5" in said
    text = out.read_text()
    assert text.startswith("# rows 9 -> 3 ") and "ROWS = 3\n" in text


def test_a_shrunk_case_that_stops_failing_the_same_way_keeps_the_case_as_built(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "kept.py"
    assert _make(project, "test_flaky", out, minimize=True) == 0
    said = capsys.readouterr().out
    assert "minimize: rows 1: mismatch" in said
    assert ("minimized: rows 9 -> 9 (stopped early: the shrunk case no longer fails the same "
            "way) in ") in said
    assert "ROWS = 9\n" in out.read_text() and '"kind": "mismatch"' in out.read_text()


@pytest.mark.parametrize(("name", "error", "says"), [
    ("test_pass", NothingToReproduce, "--standalone: test_pass passes here (headroom 0.25): "
     "no finding to reproduce; nothing written"),
    ("test_cannot", InfraError, "--standalone: the script cannot run here: no kernel library"),
    ("test_silent", InfraError, "--standalone: the script ended without a signature: boom at "
     "the end"),
    ("test_refused", UsageError, "--standalone: test_refused has no script here"),
    ("test_broken", InfraError, "--standalone: building the case failed: RuntimeError: the "
     "hook itself broke"),
])
def test_a_case_without_a_finding_to_write_is_one_line_and_nothing_written(
        name: str, error: type[Exception], says: str, project: Path, tmp_path: Path) -> None:
    out = tmp_path / "none.py"
    with pytest.raises(error) as caught:
        _make(project, name, out)
    assert str(caught.value) == says and type(caught.value) is error
    assert not out.exists()
    assert NothingToReproduce("x").exit_code == 1


def test_minimize_of_a_case_with_no_sizes_is_refused(project: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^--minimize: test_quiet has no sizes to shrink$"):
        _make(project, "test_quiet", tmp_path / "q.py", minimize=True)


def test_a_run_folder_gives_the_script_its_matrix_seed_and_origin(project: Path,
                                                                    tmp_path: Path) -> None:
    run = _run(project, "mine.yaml", "--seed", "5")
    out = tmp_path / "from-run.py"
    assert make_standalone(root=project, target=run, matrix_name=None,
                           tests=[TEST.format("test_find")], out=out, minimize=False,
                           budget_s=1.0, python="current", trust=False) == 0
    assert out.read_text().splitlines()[0] == (
        f'#  ["eng==1.0"] run {run.name} of matrix mine (seed 5) seed 5')
    with pytest.raises(UsageError, match=f"^{run}: run {run.name} has no case test_other$"):
        make_standalone(root=project, target=run, matrix_name=None,
                        tests=[TEST.format("test_other")], out=out, minimize=False,
                        budget_s=1.0, python="current", trust=False)
    emulated = _run(project, "gpu.yaml", "--emulate")
    with pytest.raises(UsageError, match=f"^{emulated}: run {emulated.name} was emulated; "
                                         "--standalone needs the engine's own run$"):
        make_standalone(root=project, target=emulated, matrix_name=None,
                        tests=[TEST.format("test_find")], out=out, minimize=False,
                        budget_s=1.0, python="current", trust=False)


def test_the_script_is_built_with_the_engines_own_interpreter_on_an_emulated_lane(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The script runs its case on the lane's CPU itself (QEMU_CPU): it is built and run
    with the interpreter as it is, never one wrapped in qemu, nor an emulated GPU's."""
    from harness.repro import standalone_main

    (project / "v2.yaml").write_text(MATRIX.replace("extends: cpu", "extends: vllm-cpu-v2"))
    asked: list[dict[str, object]] = []
    real = standalone_main.interpreter

    def interpreter(choice: str, matrix: object, **how: bool) -> str:
        asked.append(how)
        return real(choice, matrix, **how)  # type: ignore[arg-type]

    monkeypatch.setattr(standalone_main, "interpreter", interpreter)
    setup = standalone_main._setup(project, None, str(project / "v2.yaml"), "test_find",
                                   "current", False, None)
    assert setup.python == sys.executable and asked == [{"emulate": False,
                                                         "on_lane_cpu": False}]
    assert setup.import_root == project and setup.seed == 0


def test_what_was_asked_must_name_one_case_and_one_source(project: Path,
                                                           tmp_path: Path) -> None:
    common = {"root": project, "out": tmp_path / "o.py", "minimize": False, "budget_s": 1.0,
              "python": "current", "trust": False}
    with pytest.raises(UsageError, match="takes one --test ID"):
        make_standalone(target=None, matrix_name="mine", tests=[], **common)
    with pytest.raises(UsageError, match="takes one --test ID"):
        make_standalone(target=None, matrix_name="mine", tests=["a", "b"], **common)
    with pytest.raises(UsageError, match="a run folder or --matrix M"):
        make_standalone(target=None, matrix_name=None, tests=["a"], **common)
    with pytest.raises(UsageError, match="a run folder or --matrix M"):
        make_standalone(target=tmp_path, matrix_name="mine", tests=["a"], **common)


def test_the_hook_runs_with_the_project_and_harness_on_its_path(project: Path) -> None:
    got = ask(_setup(project), TEST.format("test_find"), {"kind": "?"}, {"rows": 4}, "r 9 -> 4")
    assert got["text"].startswith('# r 9 -> 4 ["eng==1.0"] matrix mine (seed 0) seed 0\n')
    # a hook that prints: its answer is the last line
    assert "ROWS = 9\n" in ask(_setup(project), TEST.format("test_chatty"), {})["text"]
    # an interpreter that runs nothing and says nothing
    with pytest.raises(InfraError, match=r"^--standalone: building the case failed: no output$"):
        ask(_setup(project, python="/bin/true"), TEST.format("test_find"), {})
    assert "ROWS = 4\n" in got["text"] and (got["sizes"], got["steps"]) == ({"rows": 9},
                                                                             {"rows": 1})
    with pytest.raises(InfraError, match=r"^--standalone: building the case failed: .*nothere"):
        ask(_setup(project, python=str(project / "nothere")), TEST.format("test_find"), {})


def test_the_script_runs_in_a_folder_of_its_own_without_the_callers_path(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    text = ask(_setup(project), TEST.format("test_env"), {})["text"]
    seen = observe_text(_setup(project), text)
    assert seen["type"] == "E"
    where, folder = str(seen["message"]).split(" ", 1)
    assert where == "-" and Path(folder).name.startswith("harness-standalone-")
    assert not Path(folder).exists()  # taken away after the run
    with pytest.raises(InfraError, match=r"^--standalone: the script did not finish: "):
        observe_text(_setup(project), "import time\ntime.sleep(30)\n", timeout_s=0.5)
    with pytest.raises(InfraError, match=r"ended without a signature: no output$"):
        observe_text(_setup(project), "pass\n")


def test_a_script_sets_the_matrixs_env_and_an_emulated_lanes_cpu(tmp_path: Path) -> None:
    from harness.platform.cpu_emulation import MARCH_ENV, cpu_option, qemu

    host = load_matrix("cpu", ROOT)
    assert script_env(host) == dict(host.runtime.env) and "QEMU_CPU" not in script_env(host)
    lane = load_matrix("vllm-cpu-v2", ROOT)
    env = script_env(lane)
    assert env["QEMU_CPU"] == cpu_option(lane.cpu, qemu()) != ""
    assert env[MARCH_ENV] == "x86-64-v2"
    assert {k: env[k] for k in lane.runtime.env} == dict(lane.runtime.env)
    # the matrix's own -march for the lane's compiler wins
    (tmp_path / "mine.yaml").write_text(f"extends: vllm-cpu-v2\ndescription: mine\n"
                                        f"runtime: {{env: {{{MARCH_ENV}: nehalem}}}}\n")
    mine = load_matrix(str(tmp_path / "mine.yaml"), ROOT)
    assert script_env(mine)[MARCH_ENV] == "nehalem"


def test_each_signature_in_words() -> None:
    assert describe_signature({"kind": "mismatch", "max_abs_err": 0.123456, "max_rel_err": 2,
                               "headroom": 12345.678}) == (
        "mismatch: max abs err 0.1235, max rel err 2, headroom 1.235e+04")
    assert describe_signature({"kind": "exception", "type": "T", "message": "m"}) == \
        "exception: T: m"
    assert describe_signature({"kind": "signal", "signal": "SIGSEGV"}) == "signal: SIGSEGV"
    assert describe_signature({"kind": "tokens_differ", "first_difference": [3, None]}) == \
        "tokens differ: first difference per prompt [3, None]"
    assert describe_signature({"kind": "cannot_run"}) == "cannot_run"
    assert describe_signature({"kind": "", "first_difference": [None]}) == \
        "passes (vLLM's greedy tokens match transformers')"
    assert describe_signature({"kind": ""}) == "passes (headroom 0)"
    assert describe_signature({}) == "passes (headroom 0)"


def test_a_finding_is_what_the_first_run_showed() -> None:
    seen = {"kind": "signal", "signal": "SIGILL"}
    assert a_finding(seen, "c") is seen  # type: ignore[arg-type]
    assert case_name("a/b.py::test_c[x::y]") == "y]" and case_name("t") == "t"
    assert case_name("a/b.py::test_c[1]") == "test_c[1]"


def test_a_file_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        target = tmp_path / "missing" / "x.py"  # root writes anywhere but nowhere
    else:
        (tmp_path / "ro").mkdir(mode=0o500)
        target = tmp_path / "ro" / "x.py"
    with pytest.raises(UsageError, match=f"^--standalone: cannot write {target}: "):
        write_text("x", target)
    write_text("print(1)\n", tmp_path / "ok.py")
    assert json.dumps((tmp_path / "ok.py").read_text()) == '"print(1)\\n"'
