"""``harness import buildkite`` on the edges of a step's pytest argv and of ``--per-file``:
options whose value is the next word (read with pytest's own table of options), attached
and combined short options, a quoted ``-k``, ``--ignore`` both ways, an option pytest here
does not know, files of one name, a step's comments under many suites. Hand-written step
files under ``tmp_path/.buildkite``; the round trip: pytest's own parser reads the argv
harness plans for each imported suite as it reads the step's own (less the shard flags)."""

from __future__ import annotations

import functools
import shlex
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.errors import UsageError
from harness.importers.buildkite import Imported, ImportedSuite
from harness.importers.matrix_out import render
from harness.matrix import load_matrix
from harness.matrix.model import Matrix
from harness.run.plan import PlanOptions, plan_suite

ROOT = Path(__file__).resolve().parents[2]
SHARDS = ("--num-shards", "--shard-id")
EXPR = "not slow and not big"
Capture = pytest.CaptureFixture[str]


def _step(key: str, lines: list[str], extra: str = "") -> str:
    """One step whose commands run each pytest line inside a runner script's quotes."""
    return (f"- label: {key}\n  key: {key}\n{extra}  commands:\n"
            + "".join(f"  - 'bash run.sh 10m \"{_yaml_quoted(line)}\"'\n" for line in lines))


def _yaml_quoted(line: str) -> str:
    return line.replace("'", "''")  # inside YAML's single quotes


def _import(tmp_path: Path, capsys: Capture, steps: str, *flags: str) -> tuple[Path, str]:
    """The steps written to ``tmp_path/.buildkite/cpu.yaml`` and imported: the matrix
    file written, and what the command said on stderr."""
    file = tmp_path / ".buildkite" / "cpu.yaml"
    file.parent.mkdir(exist_ok=True)
    file.write_text("steps:\n" + steps)
    out = tmp_path / "matrices" / "m.yaml"
    code = cli.main(["import", "buildkite", str(file), "--out", str(out), *flags])
    err = capsys.readouterr().err
    assert code == 0, err
    return out, err


def _own(line: str) -> list[str]:
    """The step's own argv after ``pytest``, less the shard flags and their values."""
    words, kept = shlex.split(line)[1:], []
    while words:
        word = words.pop(0)
        if word in SHARDS:
            words.pop(0)
        elif not word.startswith(SHARDS):
            kept.append(word)
    return kept


def _imported(matrix_file: Path) -> Matrix:
    return load_matrix(str(matrix_file))


def _planned(matrix: Matrix, matrix_file: Path, suite: str) -> list[str]:
    """What harness plans for the suite after ``pytest``, less its own flags (they end at
    its ``-ra``): the target (relative to the source root), then -m, -k, pytest_args."""
    inv = plan_suite(matrix, matrix.suites[suite], matrix_file.parent / "run", ROOT,
                     PlanOptions(python="python", platform_spec=str(matrix_file)))
    argv = list(inv.argv)
    assert inv.rootdir is not None
    return [str(Path(argv[3]).relative_to(inv.rootdir)), *argv[argv.index("-ra") + 1:]]


@functools.lru_cache(maxsize=1)
def _pytest_parser() -> Any:
    from _pytest.config import get_config

    config = get_config()
    config.pluginmanager.load_setuptools_entrypoints("pytest11")
    return config._parser


def _pytest_reads(words: list[str]) -> dict[str, Any]:
    """The argv as pytest's own parser reads it (its usage error if it would stop); the
    targets as a set, harness's ``-k (E)`` as ``E``."""
    read = vars(_pytest_parser().parse(words))
    read["file_or_dir"] = sorted(read["file_or_dir"])
    keyword = read.get("keyword") or ""
    read["keyword"] = keyword[1:-1] if keyword.startswith("(") else keyword
    return read


def _round_trip(matrix_file: Path, suite: str, line: str) -> list[str]:
    matrix = _imported(matrix_file)
    planned = _planned(matrix, matrix_file, suite)
    assert _pytest_reads(planned) == _pytest_reads(_own(line)), (planned, _own(line))
    return planned


def test_flags_with_separate_values_keep_them(tmp_path: Path, capsys: Capture) -> None:
    line = ("pytest -x --deselect tests/a/test_one.py::test_slow -p no:warnings "
            "-o log_cli=true -W error::DeprecationWarning --maxfail 2 "
            "tests/a/test_one.py tests/b/test_two.py")
    out, err = _import(tmp_path, capsys, _step("kernels", [line]))
    planned = _round_trip(out, "kernels", line)
    assert planned == ["tests/a/test_one.py", "tests/b/test_two.py", "-x",
                       "--deselect", "tests/a/test_one.py::test_slow", "-p", "no:warnings",
                       "-o", "log_cli=true", "-W", "error::DeprecationWarning",
                       "--maxfail", "2"]
    assert "unmapped: " not in err


def test_a_plugins_option_with_its_value(tmp_path: Path, capsys: Capture) -> None:
    """pytest-timeout's ``--timeout 300``: the plugin's own option, known from its entry
    point; it comes after harness's own ``--timeout=``, so the step's wins."""
    pytest.importorskip("pytest_timeout")
    line = "pytest --timeout 300 -n 2 tests/a.py tests/b.py"
    out, err = _import(tmp_path, capsys, _step("kernels", [line]))
    planned = _round_trip(out, "kernels", line)
    assert planned == ["tests/a.py", "tests/b.py", "--timeout", "300", "-n", "2"]
    assert "unmapped: " not in err


def test_attached_values_and_combined_flags(tmp_path: Path, capsys: Capture) -> None:
    line = ("pytest -vs -n2 -rA -mcpu_model --deselect=tests/a.py::test_slow -pno:warnings "
            "-x tests/a.py")
    out, _ = _import(tmp_path, capsys, _step("kernels", [line]))
    planned = _round_trip(out, "kernels", line)
    assert planned == ["tests/a.py", "-m", "cpu_model", "-vs", "-n2", "-rA",
                       "--deselect=tests/a.py::test_slow", "-pno:warnings", "-x"]
    assert _imported(out).suites["kernels"].markers == "cpu_model"


@pytest.mark.parametrize("written", [f"-k '{EXPR}'", f"-k='{EXPR}'", f"-k'{EXPR}'",
                                     f"-vk '{EXPR}'", f"-sk'{EXPR}'"])
def test_a_quoted_k_reaches_pytest_as_one_argument(tmp_path: Path, capsys: Capture,
                                                   written: str) -> None:
    line = f"pytest {written} tests/a.py tests/b.py"
    out, _ = _import(tmp_path, capsys, _step("kernels", [line]))
    planned = _round_trip(out, "kernels", line)
    assert _imported(out).suites["kernels"].k == EXPR
    assert planned[:4] == ["tests/a.py", "-k", f"({EXPR})", "tests/b.py"]


def test_ignore_folders_both_ways(tmp_path: Path, capsys: Capture) -> None:
    line = ("pytest tests/models --ignore tests/models/slow --ignore=tests/models/big "
            "--ignore-glob '*_gpu.py' -x")
    out, _ = _import(tmp_path, capsys, _step("models", [line]))
    planned = _round_trip(out, "models", line)
    assert planned == ["tests/models", "--ignore=tests/models/slow",
                       "--ignore=tests/models/big", "--ignore-glob", "*_gpu.py", "-x"]


def test_an_option_pytest_does_not_know_is_a_flag_and_said(tmp_path: Path,
                                                            capsys: Capture) -> None:
    """pytest-random-order is not installed here: its flag is kept as a flag (the step's
    environment may have it), named once though two commands carry it; the shard flags
    (pytest-shard, both forms) are dropped."""
    lines = ["pytest --num-shards=2 --shard-id 1 --random-order -x tests/a.py",
             "pytest --random-order tests/b.py"]
    out, err = _import(tmp_path, capsys, _step("kernels", lines))
    said = [e for e in err.splitlines() if "--random-order" in e]
    assert said == ["harness: unmapped: "
                    f"{tmp_path / '.buildkite' / 'cpu.yaml'}: step kernels: --random-order: "
                    "not an option of pytest here (a plugin not installed?), read as a flag "
                    "without a value"]
    matrix = _imported(out)
    assert _planned(matrix, out, "kernels") == ["tests/a.py", "--random-order", "-x"]
    assert _planned(matrix, out, "kernels_2") == ["tests/b.py", "--random-order"]


def test_several_commands_of_a_step_with_files_of_one_name(tmp_path: Path,
                                                           capsys: Capture) -> None:
    """Two pytest commands of one step over the same two test_x.py: four suites, each its
    own file, none written over another."""
    lines = ["pytest -x --deselect tests/a/test_x.py::test_slow tests/a/test_x.py "
             "tests/b/test_x.py",
             "pytest -k big tests/a/test_x.py tests/b/test_x.py"]
    out, _ = _import(tmp_path, capsys, _step("kernels", lines), "--per-file")
    matrix = _imported(out)
    assert len([n for n in matrix.suites if n.endswith("test_x")]) == 4
    planned = {name: _planned(matrix, out, name) for name in
               ("a_test_x", "b_test_x", "kernels_2_a_test_x", "kernels_2_b_test_x")}
    assert planned == {
        "a_test_x": ["tests/a/test_x.py", "-x", "--deselect", "tests/a/test_x.py::test_slow"],
        "b_test_x": ["tests/b/test_x.py", "-x", "--deselect", "tests/a/test_x.py::test_slow"],
        "kernels_2_a_test_x": ["tests/a/test_x.py", "-k", "(big)"],
        "kernels_2_b_test_x": ["tests/b/test_x.py", "-k", "(big)"],
    }


def test_three_files_of_one_name_under_per_file(tmp_path: Path, capsys: Capture) -> None:
    line = "pytest -x tests/a/test_x.py tests/b/test_x.py tests/c/test_x.py::TestOne"
    out, _ = _import(tmp_path, capsys, _step("kernels", [line]), "--per-file")
    matrix = _imported(out)
    names = [n for n in matrix.suites if n.endswith("test_x")]
    assert names == ["a_test_x", "b_test_x", "c_test_x"]
    assert [_planned(matrix, out, n)[0] for n in names] == [
        "tests/a/test_x.py", "tests/b/test_x.py", "tests/c/test_x.py::TestOne"]


def test_two_steps_of_one_label_are_two_suites(tmp_path: Path, capsys: Capture) -> None:
    steps = ("- label: Kernels\n  commands:\n  - pytest tests/a.py\n"
             "- label: Kernels\n  commands:\n  - pytest tests/b.py\n")
    out, _ = _import(tmp_path, capsys, steps)
    matrix = _imported(out)
    assert _planned(matrix, out, "kernels") == ["tests/a.py"]
    assert _planned(matrix, out, "kernels_2") == ["tests/b.py"]


def test_a_suite_name_twice_is_refused_not_written_over(tmp_path: Path) -> None:
    twice = [ImportedSuite(name="kernels", step="kernels", label="Kernels", targets=(t,))
             for t in ("tests/a.py", "tests/b.py")]
    file = tmp_path / "cpu.yaml"
    with pytest.raises(UsageError, match=r"cpu.yaml: suite kernels: two imported suites"):
        render(Imported(file=file, suites=tuple(twice), unmapped=()), extends="vllm-cpu",
               name="m", source=tmp_path)


def test_a_steps_comments_said_once_under_per_file(tmp_path: Path, capsys: Capture) -> None:
    """A step like vLLM 0.33.0's CPU-Kernel Tests: 19 files (one as a ``::Class`` node id),
    the shard flags from the agent, ``device`` and 31 ``source_file_dependencies``: the
    header says the step once, then its 19 suites."""
    files = [f"tests/kernels/test_k{i}.py" for i in range(18)]
    files.append("tests/kernels/test_moe.py::TestFusedMoE")
    deps = "".join(f"  - csrc/cpu/dep_{i}.cpp\n" for i in range(31))
    line = ("pytest -x -v -s --num-shards=$$BUILDKITE_PARALLEL_JOB_COUNT "
            "--shard-id=$$BUILDKITE_PARALLEL_JOB " + " ".join(files))
    extra = f"  device: intel_cpu\n  parallelism: 2\n  source_file_dependencies:\n{deps}"
    out, err = _import(tmp_path, capsys, _step("cpu-kernel-tests", [line], extra),
                       "--per-file")
    comments = [c for c in out.read_text().splitlines() if c.startswith("#")]
    assert comments[2:5] == ["# step cpu-kernel-tests (cpu-kernel-tests), parallelism 2",
                             "#   device: intel_cpu",
                             "#   source_file_dependency: csrc/cpu/dep_0.cpp"]
    assert len(comments) == 2 + 1 + 1 + 31 + 19
    assert sum(c.startswith("#   suite ") for c in comments) == 19
    assert err.count("source_file_dependencies: no place") == 1
    matrix = _imported(out)
    names = [n for n in matrix.suites if n.startswith("test_")]
    targets = [_planned(matrix, out, n) for n in names]
    assert all(t[1:] == ["-x", "-v", "-s"] for t in targets)
    assert [t[0] for t in targets] == files


def test_env_before_pytest_and_a_key_value_after_it(tmp_path: Path, capsys: Capture) -> None:
    """Only the words before ``pytest`` are env; ``-o key=value`` after it is pytest's."""
    line = "VLLM_CI_ENV=0 pytest -o log_cli=true tests/a.py"
    out, err = _import(tmp_path, capsys, _step("kernels", [line]))
    assert err.count("env set inline") == 1 and "not kept: VLLM_CI_ENV=0\n" in err
    assert _planned(_imported(out), out, "kernels") == ["tests/a.py", "-o", "log_cli=true"]
