"""harness repro's pieces: node ids from JUnit, crashed suites, shards, env, --test."""

from __future__ import annotations

from pathlib import Path

import pytest
from runs import SUITE, Runs

from harness.errors import UsageError
from harness.matrix import load_matrix
from harness.repro.pick import pick_tests, read_suite
from harness.repro.run import Recorded, build_request, choose, read_recorded, restored_env
from harness.results import layout
from harness.results.layout import Shard
from harness.roots import project_root

ROOT = project_root()
FIXTURE = "tests/data/suites/repro/check_repro.py"
MODULE = "tests.data.suites.repro.check_repro"


@pytest.mark.parametrize(
    ("name", "expected"),
    [("fusion-shard-2-of-4.xml", ("fusion", "2/4")), ("e2e.xml", ("e2e", None)),
     ("my-shard-x.xml", ("my-shard-x", None))],
)
def test_suite_and_shard_of_a_junit_name(name: str, expected: tuple[str, str | None]) -> None:
    assert layout.suite_of(Path(name)) == expected


def test_failed_ids_are_pytests_own(real_runs: Runs) -> None:
    suite = read_suite(real_runs.failing / "junit" / "record.xml", ROOT)
    assert suite.failed == (f"{SUITE}::test_regresses[shape1]",)
    assert f"{SUITE}::test_decorated[float32]" in suite.all_ids  # decorated: still its own id
    assert suite.whole is None


def test_a_crashed_suite_reruns_whole(real_runs: Runs) -> None:
    rec = read_recorded(real_runs.crashed)
    suite = read_suite(rec.junit_files[0], ROOT)
    assert suite.whole == "record: crashed: killed by SIGABRT (exit -6)"
    assert f"{SUITE}::test_first_passes" in suite.all_ids
    matrix = load_matrix(real_runs.crashed / "matrix.json")
    choice = choose(rec, matrix, ROOT, [])
    assert choice.tests == {} and choice.whole == {"record": suite.whole}
    request = build_request(rec, choice, matrix=matrix, emulate=False, docker=None)
    assert request.suites == ("record",) and request.repro_of == rec.run_id


def test_a_shard_reruns_in_its_shard(real_runs: Runs) -> None:
    rec = read_recorded(real_runs.shards[1])
    assert rec.shard == "2/2"
    suite = read_suite(rec.junit_files[0], ROOT)
    assert suite.shard == "2/2" and suite.failed == () and suite.all_ids


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
    # Only the allowlist (seed, threads, the plugin's variables) comes back by default.
    assert restored_env(rec, load_matrix("cpu")) == {"OMP_NUM_THREADS": "8"}
    assert capsys.readouterr().out == (
        "harness repro: not restored (not seed or thread settings): MY_API_TOKEN, MY_FLAG "
        "(--trust-run-folder restores them)\n")
    trusted = restored_env(rec, load_matrix("cpu"), trust=True)
    assert trusted == {"OMP_NUM_THREADS": "8", "MY_FLAG": "1"}
    assert capsys.readouterr().out == (
        "harness repro: not restored (masked in the manifest): MY_API_TOKEN; "
        "this shell's values apply\n")


def test_test_option_node_ids_must_exist_and_belong_to_a_suite() -> None:
    from harness.matrix.suite_paths import SuitePlace

    paths = {name: SuitePlace(target=ROOT / path, rootdir=ROOT, cwd=None, inside=True)
             for name, path in {"platform": "suites/platform", "repro": FIXTURE}.items()}
    assert pick_tests([f"{FIXTURE}::test_passes"], [], paths, ROOT) == {
        "repro": (f"{FIXTURE}::test_passes",)}
    with pytest.raises(UsageError, match="is not in this checkout"):
        pick_tests(["suites/platform/test_nope.py::test_x"], [], paths, ROOT)
    with pytest.raises(UsageError, match="is in none of the matrix's suites "
                                         r"\(platform: suites/platform, repro: "):
        pick_tests(["tests/integration/test_repro_pieces.py::test_x"], [], paths, ROOT)


def test_plan_runs_node_ids_in_place_of_the_suite_path_and_never_shards_them(
    tmp_path: Path,
) -> None:
    from harness.run.plan import PlanOptions, plan_run

    matrix = load_matrix("cpu")
    ids = ("suites/platform/test_dtypes.py::test_a[float16]",)
    options = PlanOptions(python="python", platform_spec="m.json",
                          suites=("platform", "e2e"), shard=Shard.parse("2/3"),
                          tests={"platform": ids})
    by_suite = {inv.suite: inv for inv in plan_run(matrix, tmp_path, ROOT, options)}
    platform, e2e = by_suite["platform"], by_suite["e2e"]
    assert platform.argv[3:4] == (str(ROOT / ids[0]),)
    assert str(ROOT / "suites/platform") not in platform.argv
    assert platform.shard is None and platform.junit.name == "platform.xml"
    assert not any(a.startswith("--harness-shard=") for a in platform.argv)
    assert str(e2e.shard) == "2/3" and "--harness-shard=2/3" in e2e.argv
