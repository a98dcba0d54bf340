"""harness.plugin.shard in real pytest sessions: shards partition the collection."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

SUITE = {
    "test_fast.py": "import pytest\n"
                    "@pytest.mark.parametrize('k', range(12))\n"
                    "def test_fast(k):\n    pass\n",
    "test_slow.py": "def test_a():\n    pass\n\ndef test_b():\n    pass\n\n"
                    "class TestC:\n    def test_c(self):\n        pass\n",
    "test_state.py": "import pytest\npytestmark = pytest.mark.same_process\n"
                     + "".join(f"def test_s{k}():\n    pass\n" for k in range(6)),
}


def _collected(result: pytest.RunResult) -> list[str]:
    return sorted(line for line in result.outlines if "::" in line and " " not in line)


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(**{name.removesuffix(".py"): body for name, body in SUITE.items()})
    durations = {f"test_fast.py::test_fast[{k}]": 0.1 * (k + 1) for k in range(12)}
    durations.update({"test_slow.py::test_a": 5.0, "test_slow.py::TestC::test_c": 3.0})
    (pytester.path / "durations.json").write_text(json.dumps(
        {"schema": 1, "matrix": "cpu", "durations": durations,
         "siblings": {"other": {"test_slow.py::test_b": 2.0, "test_slow.py::test_a": 2.5,
                                "test_fast.py::test_fast[0]": 0.05,
                                "test_fast.py::test_fast[1]": 0.1}}}))
    return pytester


def _run_shard(suite: pytest.Pytester, spec: str, *extra: str) -> pytest.RunResult:
    return suite.runpytest("-p", "harness.plugin.shard", "--collect-only", "-q",
                           f"--harness-shard={spec}", "--harness-durations=durations.json",
                           *extra)


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_shards_are_disjoint_and_cover_everything(suite: pytest.Pytester, count: int) -> None:
    everything = _collected(suite.runpytest("-p", "harness.plugin.shard", "--collect-only",
                                            "-q"))
    assert len(everything) == 21
    shards = [_collected(_run_shard(suite, f"{i}/{count}")) for i in range(1, count + 1)]
    flat = [t for s in shards for t in s]
    assert sorted(flat) == everything
    assert len(set(flat)) == len(flat)


def test_same_process_module_stays_together(suite: pytest.Pytester) -> None:
    holders = [i for i in (1, 2, 3)
               if any("test_state.py" in t for t in _collected(_run_shard(suite, f"{i}/3")))]
    assert len(holders) == 1


def test_shards_split_what_keyword_selected(suite: pytest.Pytester) -> None:
    shards = [_collected(_run_shard(suite, f"{i}/2", "-k", "fast")) for i in (1, 2)]
    flat = sorted(t for s in shards for t in s)
    assert flat == sorted(f"test_fast.py::test_fast[{k}]" for k in range(12))


def test_header_reports_plan_and_sources(suite: pytest.Pytester) -> None:
    result = _run_shard(suite, "2/3")
    line = next(x for x in result.outlines if x.startswith("harness shard 2/3:"))
    assert re.search(r"of 21 tests, ~[\d.]+s of [\d.]+s", line)
    # 14 timed here; test_b from the sibling (3 tests in common give its speed);
    # test_state.py was never timed anywhere, so its tests take the global median.
    assert line.count("durations: global 6, history 14, sibling 1)") == 1
    fingerprints = {re.search(r"plan (\w+)", x).group(1)  # type: ignore[union-attr]
                    for i in (1, 2, 3)
                    for x in _run_shard(suite, f"{i}/3").outlines if "plan " in x}
    assert len(fingerprints) == 1


def test_bad_shard_spec_is_a_usage_error(suite: pytest.Pytester) -> None:
    result = _run_shard(suite, "4/3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--shard '4/3': expected i/N*"])


def test_bad_durations_file_names_file_and_key(suite: pytest.Pytester) -> None:
    (suite.path / "durations.json").write_text('{"schema": 1, "durations": {"x": "slow"}}')
    result = _run_shard(suite, "1/2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*durations.json: durations.x: expected seconds*"])


def test_without_durations_file_every_test_counts_the_same(suite: pytest.Pytester) -> None:
    sizes = [len(_collected(suite.runpytest("-p", "harness.plugin.shard", "--collect-only",
                                            "-q", f"--harness-shard={i}/2")))
             for i in (1, 2)]
    # 15 single tests + one group of 6: LPT gives the group one shard, 15 fill around it.
    assert sorted(sizes) == [10, 11]


def test_plugin_is_inert_without_shard(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_one="def test_x():\n    pass\n")
    result = pytester.runpytest("-p", "harness.plugin.shard", "-q")
    result.assert_outcomes(passed=1)
    assert not any("harness shard" in x for x in result.outlines)
