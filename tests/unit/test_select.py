"""harness.select: the import graph, the rules' matching, the lane file, the plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import harness.select.imports as imports
from harness.errors import ConfigError
from harness.select.imports import build_graph, parse_source
from harness.select.rules import LaneSelection, Rule, dump_lane, load_lane

pytest_plugins = ("pytester",)


def test_parse_source_names_imports_relative_imports_and_module_tables() -> None:
    parsed = parse_source(
        "import a.b\nfrom .c import d\nfrom ..e import f as g\n"
        "K = {'op1': ('pkg.kern.one', 'fn'), 'op2': 'pkg.kern.two', 'x': 'not a module'}\n",
        "pkg.sub")
    assert {"a.b", "pkg.sub.c.d", "pkg.sub.c", "pkg.e.f", "pkg.e"} <= set(parsed.imports)
    assert ("op1", "pkg.kern.one") in parsed.keyed and ("op2", "pkg.kern.two") in parsed.keyed
    assert "not a module" not in parsed.strings


def _tree(root: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/base.py": "X = 1\n",
        "pkg/mid.py": "from pkg import base\n",
        "pkg/table.py": "T = {'op': ('pkg.loose', 'f')}\n",
        "pkg/loose.py": "import pkg.base\n",
        "suite/helper.py": "import pkg.mid\n",
        "suite/test_a.py": "from helper import thing\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_closure_follows_imports_not_strings_and_resolves_beside_the_test(tmp_path: Path) -> None:
    _tree(tmp_path)
    graph = build_graph(tmp_path, ["pkg", "suite"], cache=tmp_path / "cache.json")
    assert graph.closure("suite/test_a.py") == {
        "suite/test_a.py", "suite/helper.py", "pkg/__init__.py", "pkg/mid.py", "pkg/base.py"}
    assert "pkg/loose.py" not in graph.closure("pkg/table.py")
    assert graph.dynamic["pkg/table.py"] == {"pkg/loose.py"}
    assert graph.keyed["pkg/table.py"] == (("op", "pkg/loose.py"),)


def test_the_cache_spares_parsing_unchanged_files(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path)
    cache = tmp_path / "cache.json"
    first = build_graph(tmp_path, ["pkg", "suite"], cache=cache)
    (tmp_path / "pkg/base.py").write_text("import pkg.loose\n")
    parsed: list[str] = []
    real = imports.parse_source

    def counting(source: str, package: str) -> imports.Parsed:
        parsed.append(source)
        return real(source, package)

    monkeypatch.setattr(imports, "parse_source", counting)
    second = build_graph(tmp_path, ["pkg", "suite"], cache=cache)
    assert parsed == ["import pkg.loose\n"]  # only the changed file
    assert "pkg/loose.py" in second.closure("suite/test_a.py")
    assert "pkg/loose.py" not in first.closure("suite/test_a.py")
    cache.write_text("{not json")  # a damaged cache is rebuilt, not trusted
    assert build_graph(tmp_path, ["pkg", "suite"], cache=cache).closure("pkg/mid.py")


PARITY = "suites/kp/test_parity.py"
E2E = "suites/e2e/test_e2e.py"


def _lane(*rules: Rule) -> LaneSelection:
    return LaneSelection(lane="cpu", rules=rules, listed={"rms_norm": ("torch", "native"),
                                                          "rotary": ("native",)},
                         dispatching=(PARITY, E2E), providers=("native", "torch", "triton"),
                         ops=("rms_norm", "rotary", "silu"))


def test_kernel_rules_match_the_provider_token_the_op_and_the_platform_set() -> None:
    lane = _lane(Rule(kind="kernel", source="p.py", why="w", provider="torch"))
    assert lane.selects(f"{PARITY}::test_parity[rms_norm-2d-float32-torch-cpu]")
    assert not lane.selects(f"{PARITY}::test_parity[rms_norm-2d-float32-triton-cpu]")
    assert lane.selects(f"{E2E}::test_generate[torch-llama]")
    assert lane.selects(f"{E2E}::test_generate[platform-llama]")  # cpu lists torch
    assert not lane.selects(f"{E2E}::test_generate[native-llama]")
    assert not lane.selects("suites/fusion/test_fusion.py::test_x")  # does not dispatch
    triton = _lane(Rule(kind="kernel", source="k.py", why="w", provider="triton",
                        ops=("silu",)))
    assert triton.selects(f"{PARITY}::test_parity[silu-odd-float32-triton-cpu]")
    assert not triton.selects(f"{PARITY}::test_parity[rms_norm-odd-float32-triton-cpu]")
    assert triton.selects(f"{E2E}::test_generate[triton-llama]")  # names no op
    assert not triton.selects(f"{E2E}::test_generate[platform-llama]")  # cpu lists no triton


def test_module_rules_cover_files_and_folders_and_say_why() -> None:
    lane = _lane(Rule(kind="module", source="ref.py", why="imports it", path="suites/kp"))
    assert lane.selects(f"{PARITY}::test_parity[x]")
    assert not lane.selects("suites/kpx/test_y.py::t")
    assert [r.source for r in lane.why(f"{PARITY}::test_parity[x]")] == ["ref.py"]
    assert lane.suites({"kernel_parity": "suites/kp", "e2e": "suites/e2e"}) == ["kernel_parity"]


def test_a_lane_file_round_trips_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    lane = _lane(Rule(kind="kernel", source="p.py", why="w", provider="torch", ops=("silu",)))
    dump_lane(lane, tmp_path / "s.json")
    assert load_lane(tmp_path / "s.json") == lane
    (tmp_path / "bad.json").write_text(json.dumps({"schema": 99}))
    with pytest.raises(ConfigError, match=r"bad\.json.*schema"):
        load_lane(tmp_path / "bad.json")


def test_the_plugin_deselects_before_the_shards_split(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_k="import pytest\n"
                        "@pytest.mark.parametrize('p', ['rms_norm-torch', 'rms_norm-triton',"
                        " 'silu-torch', 'platform'])\n"
                        "def test_k(p):\n    pass\n",
                        test_other="def test_o():\n    pass\n")
    lane = LaneSelection(lane="cpu", rules=(
        Rule(kind="kernel", source="p.py", why="w", provider="torch", ops=("rms_norm",)),),
        listed={"rms_norm": ("native",)}, dispatching=("test_k.py",),
        providers=("torch", "triton", "native"), ops=("rms_norm", "silu"))
    dump_lane(lane, pytester.path / "sel.json")
    result = pytester.runpytest("-p", "harness.plugin.shard", "-p", "harness.plugin.select",
                                "--harness-select=sel.json", "-v")
    result.assert_outcomes(passed=1, deselected=4)
    result.stdout.fnmatch_lines(["*harness select: 1 of 5 tests affected by the change (cpu)*",
                                 "*test_k.py::test_k?rms_norm-torch? PASSED*"])
    sharded = pytester.runpytest("-p", "harness.plugin.shard", "-p", "harness.plugin.select",
                                 "--harness-select=sel.json", "--harness-shard=2/2")
    sharded.assert_outcomes(deselected=5)  # one selected test: shard 2 of 2 is empty


def test_pr_targets_drop_unaffected_lanes_and_size_shards_by_history() -> None:
    from harness.ci.pipeline import CiTarget
    from harness.ci.pull_request import pr_targets
    from harness.select.rules import Selection
    from harness.shard.durations import DurationSet

    rule = Rule(kind="kernel", source="p.py", why="w", provider="torch")
    part = _lane(rule)
    selection = Selection(ref="a" * 40, changed=("p.py",), lanes={
        "cpu": part, "zen": LaneSelection(lane="zen"),
        "cuda": LaneSelection(lane="cuda", full=True, docker=True,
                              reasons=(("images/cuda/Dockerfile", "its image recipe changed"),)),
        "xpu": part})
    targets = [CiTarget(matrix=m, queue=None, shards=4, timeout_minutes=60, nightly=True)
               for m in ("cpu", "zen", "cuda", "xpu")]
    history = DurationSet(matrix="cpu", durations={
        f"{PARITY}::test_parity[rms_norm-2d-float32-torch-cpu]": 10.0,
        f"{PARITY}::test_parity[rms_norm-2d-float32-triton-cpu]": 60.0,
        "suites/fusion/test_fusion.py::test_x": 30.0})
    kept, notes = pr_targets(targets, selection,
                             lambda lane: history if lane == "cpu" else None)
    assert [(t.matrix, t.shards, t.select_args) for t in kept] == [
        ("cpu", 1, " --changed-since " + "a" * 40),  # 10% of its time: one shard
        ("cuda", 4, " --changed-since " + "a" * 40 + " --docker"),
        ("xpu", 4, " --changed-since " + "a" * 40)]  # no history: its configured count
    assert "zen: not affected" in notes
    assert any(n.startswith("cpu: part, 1 of 4 shard(s) (10.0% of the time by its history")
               for n in notes)
    sibling = DurationSet(matrix="xpu", siblings={"cpu": dict(history.durations)})
    kept, notes = pr_targets(targets[3:], selection, lambda lane: sibling)
    assert kept[0].shards == 1 and "by cpu's history" in notes[-1]
