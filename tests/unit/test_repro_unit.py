"""harness repro's pieces: node ids from JUnit, crashed suites, shards, env, --test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.matrix import load_matrix, repo_root
from harness.repro import Recorded, build_request, choose, restored_env
from harness.repro_select import node_id, pick_tests, read_suite, shard_of
from harness.results.junit_write import write_salvaged_junit

ROOT = repo_root()
FIXTURE = "tests/data/suites/repro/check_repro.py"
MODULE = "tests.data.suites.repro.check_repro"


def test_node_ids_come_back_from_classname_name_and_file() -> None:
    assert node_id(MODULE, "test_dtype[float16]", FIXTURE, ROOT) == (
        f"{FIXTURE}::test_dtype[float16]")
    assert node_id(f"{MODULE}.TestGroup", "test_seeded", "", ROOT) == (
        f"{FIXTURE}::TestGroup::test_seeded")
    assert node_id(f"{MODULE}.TestGroup", "test_seeded", FIXTURE, ROOT) == (
        f"{FIXTURE}::TestGroup::test_seeded")
    assert node_id("suites.gone.test_x", "test_y", "", ROOT) is None  # not in this checkout
    assert node_id("com.example.CalculatorTest", "adds", "", ROOT) is None
    assert node_id("", "suites.platform.test_dtypes", "", ROOT) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [("fusion-shard-2-of-4.xml", ("fusion", "2/4")), ("e2e.xml", ("e2e", None)),
     ("my-shard-x.xml", ("my-shard-x", None))],
)
def test_shard_of_junit_name(name: str, expected: tuple[str, str | None]) -> None:
    assert shard_of(Path(name)) == expected


def _crashed_shard(run_dir: Path) -> Path:
    junit = run_dir / "junit" / "platform-shard-2-of-3.xml"
    partial = run_dir / "junit" / "platform-shard-2-of-3.partial.jsonl"
    partial.parent.mkdir(parents=True)
    records = [
        {"nodeid": "suites/platform/test_host.py::test_a", "when": "call", "outcome": "passed"},
        {"nodeid": "suites/platform/test_host.py::test_b", "when": "call", "outcome": "failed"},
    ]
    partial.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"nodeid": "trunc')
    write_salvaged_junit(junit, "platform", partial, "crashed: signal SIGSEGV", ["boom"])
    return junit


def test_a_crashed_suite_reruns_whole_in_its_shard_with_the_recorded_durations(
    tmp_path: Path,
) -> None:
    junit = _crashed_shard(tmp_path)
    suite = read_suite(junit, ROOT)
    assert suite.suite == "platform" and suite.shard == "2/3"
    assert suite.whole == "platform: crashed: signal SIGSEGV"
    assert suite.failed == ("suites/platform/test_host.py::test_b",)
    (tmp_path / "durations.json").write_text("{}")
    rec = Recorded(run_id="r1", run_dir=tmp_path, junit_files=(junit,), matrix_name="cpu",
                   matrix_hash="", shard="2/3", planned=("platform", "e2e"))
    matrix = load_matrix("cpu")
    choice = choose(rec, matrix, ROOT, [])
    assert choice.tests == {}
    assert choice.whole == {"platform": "platform: crashed: signal SIGSEGV",
                            "e2e": "no JUnit file was written"}
    assert choice.shard == "2/3"
    request = build_request(rec, choice, matrix=matrix, emulate=False, docker=None)
    assert request.suites == ("platform", "e2e") and request.shard == "2/3"
    assert request.durations_file == tmp_path / "durations.json"
    assert request.repro_of == "r1"


def test_junit_without_partial_file_and_a_collection_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mod="def test_ok():\n    pass\n\ndef test_bad():\n    assert 0\n")
    pytester.makepyfile(test_broken="import no_such_module_for_repro\n")
    junit = pytester.path / "out.xml"
    pytester.runpytest_subprocess(
        f"--junitxml={junit}", "-p", "no:cacheprovider", "--continue-on-collection-errors")
    suite = read_suite(junit, pytester.path)
    assert suite.failed == ("test_mod.py::test_bad",)
    assert suite.whole is not None and "test_broken" in suite.whole
    assert set(suite.all_ids) == {"test_mod.py::test_ok", "test_mod.py::test_bad"}


def test_env_is_restored_less_machine_paths_caches_and_masked_values(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rec = Recorded(run_id="r", run_dir=None, junit_files=(), matrix_name="cpu", matrix_hash="",
                   env={"HARNESS_ROOT": "/ci/checkout", "OMP_NUM_THREADS": "8",
                        "TIKTOKEN_CACHE_DIR": "***", "MY_API_TOKEN": "***",
                        "HF_HOME": "/ci/cache/hf", "MY_FLAG": "1"})
    assert restored_env(rec, load_matrix("cpu")) == {"OMP_NUM_THREADS": "8", "MY_FLAG": "1"}
    assert capsys.readouterr().out == (
        "harness repro: not restored (masked in the manifest): MY_API_TOKEN; "
        "this shell's values apply\n")


def test_test_option_node_ids_must_exist_and_belong_to_a_suite() -> None:
    paths = {"platform": "suites/platform", "repro": FIXTURE}
    assert pick_tests([f"{FIXTURE}::test_passes"], [], paths, ROOT) == {
        "repro": (f"{FIXTURE}::test_passes",)}
    with pytest.raises(UsageError, match="is not in this checkout"):
        pick_tests(["suites/platform/test_nope.py::test_x"], [], paths, ROOT)
    with pytest.raises(UsageError, match="is in none of the matrix's suites"):
        pick_tests(["tests/unit/test_repro_unit.py::test_x"], [], paths, ROOT)


def test_plan_runs_node_ids_in_place_of_the_suite_path_and_never_shards_them(
    tmp_path: Path,
) -> None:
    from harness.plan import PlanOptions, plan_run

    matrix = load_matrix("cpu")
    ids = ("suites/platform/test_dtypes.py::test_a[float16]",)
    options = PlanOptions(python="python", platform_spec="m.json",
                          suites=("platform", "e2e"), shard="2/3", tests={"platform": ids})
    by_suite = {inv.suite: inv for inv in plan_run(matrix, tmp_path, ROOT, options)}
    platform, e2e = by_suite["platform"], by_suite["e2e"]
    assert platform.argv[3:4] == (str(ROOT / ids[0]),)
    assert str(ROOT / "suites/platform") not in platform.argv
    assert platform.shard is None and platform.junit.name == "platform.xml"
    assert not any(a.startswith("--harness-shard=") for a in platform.argv)
    assert e2e.shard == "2/3" and "--harness-shard=2/3" in e2e.argv
