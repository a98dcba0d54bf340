"""The speed rules of ``harness report compare`` (harness/reports/compare.py): a case is
slower in B at ``after / before >= margin`` (exactly at it counts), faster at ``before /
after >= margin``; a case with a ratio on one side only is not compared; a run with no
ratio says why as far as its cases do; ``--speed-margin`` is a factor above 1, anything
else one line and exit 2. Real run folders with speed are compared in
tests/integration/test_compare_speed.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness.cli import main
from harness.reports.compare import DEFAULT_SPEED_MARGIN, compare_runs, speed_moved
from harness.reports.compare_render import LISTED, to_json, to_markdown
from harness.results.run_folder import CaseResult, RunFolder, read_run


def _run(tmp_path: Path, name: str, *cases: CaseResult) -> RunFolder:
    folder = tmp_path / name
    (folder / "junit").mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"run_id": name,
                                                      "matrix": {"name": "cpu"}}))
    return replace(read_run(folder, print), cases={f"{c.suite}::{c.nodeid}": c for c in cases})


def case(nodeid: str, speed: float | None = None, skipped: str = "") -> CaseResult:
    return CaseResult(suite="s", nodeid=nodeid, status="passed", message="", speed=speed,
                      speed_skipped=skipped)


def test_the_default_margin_is_the_speed_tiers() -> None:
    assert DEFAULT_SPEED_MARGIN == 1.25


@pytest.mark.parametrize(("before", "after", "verdict"), [
    (1.0, 1.25, "slower"), (0.4, 0.5, "slower"), (0.8, 1.0, "slower"),  # exactly 1.25x
    (1.0, 1.24, None), (0.5, 0.62, None), (1.0, 1.0, None),
    (1.25, 1.0, "faster"), (0.5, 0.4, "faster"), (1.24, 1.0, None), (2.0, 0.1, "faster"),
])
def test_exactly_at_the_margin_is_a_change_and_just_under_is_not(
        before: float, after: float, verdict: str | None) -> None:
    assert speed_moved(before, after, 1.25) == verdict


def test_slower_and_faster_by_factor_and_one_side_alone_not_compared(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", case("same", 1.0), case("bit", 1.0), case("edge", 0.4),
             case("much", 0.5), case("quick", 2.0), case("only_a", 1.0),
             case("gone", 1.0), case("none", skipped="HARNESS_SPEED=off"))
    b = _run(tmp_path, "b", case("same", 1.1), case("bit", 1.24), case("edge", 0.5),
             case("much", 2.0), case("quick", 1.0), case("only_a", skipped="why"),
             case("none", 9.0), case("new", 5.0))
    result = compare_runs(a, b)
    assert [(c.nodeid, c.before, c.after, c.factor) for c in result.speed_slower] == [
        ("much", 0.5, 2.0, 4.0), ("edge", 0.4, 0.5, pytest.approx(1.25))]
    assert [(c.nodeid, c.factor) for c in result.speed_faster] == [("quick", 0.5)]
    # in both runs with a ratio in both: same, bit, edge, much, quick; one side: only_a, none
    assert result.speed_compared == 5 and result.speed_one_side == 2
    assert not result.unchanged
    assert (result.a.speed_cases, result.b.speed_cases) == (7, 7)
    assert result.a.speed_skipped == ["HARNESS_SPEED=off"] and result.b.speed_skipped == ["why"]
    wide = compare_runs(a, b, speed_margin=4.0)
    assert [c.nodeid for c in wide.speed_slower] == ["much"] and wide.speed_faster == []
    same = compare_runs(a, a)
    assert same.unchanged and same.speed_compared == 7 and same.speed_recorded


def test_the_markdown_lists_slower_then_faster_and_the_json_has_them(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", case("t1", 1.0), case("t2", 1.0), case("t`3", 2.0))
    b = _run(tmp_path, "b", case("t1", 3.0), case("t2", 1.5), case("t`3", 1.0))
    comparison = compare_runs(a, b)
    text = to_markdown(comparison)
    assert ("## Speed\n\n3 case(s) with a speed ratio (the engine's kernel time over the "
            "baseline's) in both runs; a change is a factor of 1.25 or more either way.\n\n"
            "### Slower in B (2)\n\n- `s::t1`: 1 -> 3 (3x)\n- `s::t2`: 1 -> 1.5 (1.5x)\n\n"
            "### Faster in B (1)\n\n- ``s::t`3``: 2 -> 1 (0.5x)\n\n## Known failures") in text
    assert "; speed 2 slower, 1 faster." in text and "recorded no speed" not in text
    data = json.loads(to_json(comparison))
    assert data["speed_margin"] == 1.25 and data["speed_compared"] == 3
    assert [c["nodeid"] for c in data["speed_slower"]] == ["t1", "t2"]
    assert data["speed_faster"] == [{"suite": "s", "nodeid": "t`3", "before": 2.0,
                                     "after": 1.0, "factor": 0.5}]
    assert data["a"]["speed_cases"] == 3 and data["b"]["speed_skipped"] == []


def test_a_run_with_no_speed_says_why_as_far_as_its_cases_do(tmp_path: Path) -> None:
    timed = _run(tmp_path, "a", case("t1", 1.0), case("t2", 1.0))
    reasons = [f"reason {i} <b>*x*</b>" for i in range(7)]
    off = _run(tmp_path, "b", case("t1", skipped=reasons[0]), case("t2", skipped=reasons[0]),
               *(case(f"u{i}", skipped=r) for i, r in enumerate(reasons)))
    result = compare_runs(timed, off)
    assert result.speed_compared == 0 and result.speed_one_side == 2
    assert result.b.speed_skipped_cases == 9 and result.b.speed_skipped[0] == reasons[0]
    assert len(result.b.speed_skipped) == 5  # a few: the most frequent first
    text = to_markdown(result)
    assert "Run B recorded no speed: 9 of its cases say why not:\n\n- `reason 0 <b>*x*</b>`" \
        in text and "Run A recorded no speed" not in text
    assert "2 case(s) of both runs have a ratio in one run only (not compared)." in text
    assert "speed 0 slower" not in text  # nothing compared: the headline leaves speed out
    old = _run(tmp_path, "old", case("t1"), case("t2"))  # before the speed tier
    text = to_markdown(compare_runs(old, timed))
    assert "Run A recorded no speed: none of its cases has a speed ratio or says why not" \
        in text
    assert "## Speed" not in to_markdown(compare_runs(old, old))  # neither run: no section


def test_a_long_list_of_slower_cases_is_cut_in_the_markdown(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", *(case(f"t{i:03}", 1.0) for i in range(LISTED + 2)))
    b = _run(tmp_path, "b", *(case(f"t{i:03}", 2.0) for i in range(LISTED + 2)))
    result = compare_runs(a, b)
    text = to_markdown(result)
    assert f"### Slower in B ({LISTED + 2})" in text
    assert "- ... 2 more (the JSON lists all)" in text and "`s::t050`" not in text
    assert len(json.loads(to_json(result))["speed_slower"]) == LISTED + 2


def _folder(path: Path) -> Path:
    (path / "junit").mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"run_id": "r", "matrix": {"name": "cpu"}}))
    return path


@pytest.mark.parametrize(("value", "line"), [
    ("fast", "--speed-margin 'fast': not a factor (a number above 1, such as 1.5)"),
    ("1", "--speed-margin '1': a factor must be above 1 (1.5: half as slow again)"),
    ("0.5", "--speed-margin '0.5': a factor must be above 1 (1.5: half as slow again)"),
    ("nan", "--speed-margin 'nan': a factor must be above 1 (1.5: half as slow again)"),
])
def test_a_bad_speed_margin_is_one_line(value: str, line: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    run = _folder(tmp_path / "run")
    assert main(["report", "compare", str(run), str(run), "--speed-margin", value]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"harness: error: {line}\n" and captured.out == ""


def test_a_good_speed_margin_is_the_comparisons(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    run = _folder(tmp_path / "run")
    out = tmp_path / "c.json"
    assert main(["report", "compare", str(run), str(run), "--speed-margin", "2x",
                 "--format", "json", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["speed_margin"] == 2.0
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert main(["report", "compare", str(run), str(run), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["speed_margin"] == 1.25
