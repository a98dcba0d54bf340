"""``harness report compare`` over run folders ``harness run`` wrote, and ``harness run
--pin`` building its own environment: two nights of the compare suite
(tests/data/suites/compare, under two matrices of one lane that list other known
failures), and two runs of a matrix with one small pin, once as pinned and once with
``--pin``, each in an environment of its own (built under the session's home)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.runs import harness

SUITE = "tests/data/suites/compare/check_compare.py"
RECORD = "tests/data/suites/record/check_record.py"
KNOWN_A = f"""
  - id: '{SUITE}::test_fixed_on_b'
    reason: saturates on night a
    action: xfail
"""
KNOWN_B = f"""
  - id: '{SUITE}::test_becomes_known'
    reason: strided rows read as packed, found on night b
    action: xfail
  - id: '{SUITE}::test_removed_long_ago'
    reason: a test that is gone
    action: xfail
"""


def _matrix(folder: Path, known: str) -> Path:
    folder.mkdir(parents=True)
    path = folder / "compare.yaml"  # one name, so one lane: only the known failures differ
    path.write_text("extends: cpu.yaml\nsuites:\n"
                    f"  compare: {{path: {SUITE}, workers: 1, timeout_s: 300, enabled: true}}\n"
                    f"known_failures:{known}")
    return path


def _new_run(reports: Path, before: set[Path], done: subprocess.CompletedProcess[str]) -> Path:
    (new,) = set(reports.glob("*/*")) - before
    return new


def _run(reports: Path, *args: str, expect: int, env: dict[str, str] | None = None) -> Path:
    before = set(reports.glob("*/*"))
    done = harness("run", *args, "--reports", str(reports), env=env)
    assert done.returncode == expect, done.stdout[-3000:] + done.stderr[-2000:]
    return _new_run(reports, before, done)


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("nights")
    reports = folder / "reports"
    runs = []
    for night, known in (("a", KNOWN_A), ("b", KNOWN_B)):
        matrix = _matrix(folder / night, known)
        runs.append(_run(reports, "--matrix", str(matrix), "--suite", "compare", "--python",
                         "current", expect=1,
                         env={"COMPARE_NIGHT": night}))
    return runs[0], runs[1]


def _compare(*args: str) -> subprocess.CompletedProcess[str]:
    return harness("report", "compare", *map(str, args))


def _ids(items: list[dict[str, str]]) -> list[str]:
    return [item["nodeid"].rsplit("::", 1)[1] for item in items]


def test_compare_names_what_changed_between_two_nights(nights: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    a, b = nights
    out = tmp_path / "compare.json"
    done = _compare(a, b, "--format", "json", "--out", out)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    data = json.loads(out.read_text())
    assert data["same_lane"] and data["a"]["run_id"] == a.name and data["b"]["run_id"] == b.name
    changed = {c["nodeid"].rsplit("::", 1)[1]: (c["before"], c["after"])
               for c in data["outcomes"]}
    assert changed == {"test_regresses": ("passed", "failed"),
                       "test_becomes_known": ("failed", "xfail"),
                       "test_fixed_on_b": ("xfail", "passed")}
    # another exception is a new signature; the same one with other numbers is not
    (signature,) = data["signatures"]
    assert signature["nodeid"].endswith("::test_raises_otherwise")
    assert signature["before_signature"].startswith("ValueError: width # rejected")
    assert signature["after_signature"].startswith("TypeError: bfloat16 unsupported")
    (moved,) = data["headroom"]  # test_headroom_holds moved by less than 10%
    assert moved["nodeid"].endswith("::test_headroom_drifts") and moved["name"] == "headroom"
    assert moved["before"] == pytest.approx(0.2, rel=0.05)
    assert moved["after"] == pytest.approx(0.6, rel=0.05)
    assert _ids(data["known_new"]) == ["test_becomes_known"]
    assert data["known_new"][0]["reason"].startswith("strided rows read as packed")
    assert _ids(data["known_gone"]) == ["test_fixed_on_b"]
    assert [u.split("::")[-1] for u in data["unmatched_new"]] == ["test_removed_long_ago"]
    assert data["only_a"] == [] and [k.split("::")[-1] for k in data["only_b"]] == [
        "test_new_on_b"]
    assert data["pins"] == [] and data["a"]["requirements"] is None  # --python current


def test_the_markdown_says_the_same(nights: tuple[Path, Path]) -> None:
    a, b = nights
    done = _compare(a, b)
    assert done.returncode == 0, done.stderr
    md = done.stdout.splitlines()
    assert "## Outcome changed (3)" in md and "## Failure signature changed (1)" in md
    assert any(line.startswith(f"- `compare::{SUITE}::test_regresses`: passed -> failed: "
                               "`AssertionError: rms_norm drifted by 3 ulp on night b")
               for line in md)
    assert any("test_headroom_drifts` `headroom`: 0.2" in line and "-> 0.6" in line
               for line in md)
    assert f"- `compare::{SUITE}::test_raises_otherwise` (failed): `ValueError: width # " \
        "rejected` -> `TypeError: bfloat16 unsupported`" in md
    assert "### New in B (1)" in md and "### Gone in B (1)" in md
    assert "## Only in B (1)" in md


def test_a_run_against_itself_changed_nothing(nights: tuple[Path, Path]) -> None:
    done = _compare(nights[0], nights[0])
    assert done.returncode == 0
    assert "Nothing changed: the same outcomes, signatures, headroom and pins." in done.stdout


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the matrix's pins, with --pin six==1.16.0, the reports folder): the record suite in
    environments of one small pin, built here (the plugin runs without torch)."""
    folder = tmp_path_factory.mktemp("pinned")
    matrix = folder / "pinned.yaml"
    matrix.write_text("extends: cpu.yaml\npython:\n  requirements: [\"six==1.17.0\"]\n"
                      "suites:\n"
                      f"  record: {{path: {RECORD}, workers: 1, timeout_s: 300, enabled: true}}\n")
    reports = folder / "reports"
    plain = _run(reports, "--matrix", str(matrix), "--suite", "record", expect=0)
    bumped = _run(reports, "--matrix", str(matrix), "--suite", "record", "--pin", "six==1.16.0",
                  expect=0)
    return plain, bumped, reports


def _six(run: Path) -> str:
    python = json.loads((run / "manifest.json").read_text())["python"]
    done = subprocess.run([python, "-c", "import six; print(six.__version__)"],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_a_pin_builds_its_own_environment_and_the_run_records_it(
        pinned: tuple[Path, Path, Path]) -> None:
    plain, bumped, _ = pinned
    assert (_six(plain), _six(bumped)) == ("1.17.0", "1.16.0")
    manifest = json.loads((bumped / "manifest.json").read_text())
    assert manifest["pins"] == [{"requirement": "six==1.16.0", "replaces": "six==1.17.0"}]
    assert manifest["requirements"] == ["six==1.16.0"]
    recorded = json.loads((bumped / "matrix.json").read_text())
    assert recorded["python"]["requirements"] == ["six==1.16.0"]  # a repro builds the same
    assert json.loads((plain / "manifest.json").read_text())["pins"] == []


def test_compare_shows_the_pin_bump(pinned: tuple[Path, Path, Path]) -> None:
    plain, bumped, _ = pinned
    done = _compare(plain, bumped, "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["pins"] == [{"name": "six", "before": "six==1.17.0", "after": "six==1.16.0"}]
    assert data["b"]["pins"] == ["six==1.16.0 (was six==1.17.0)"]
    assert data["outcomes"] == [] and data["only_a"] == [] and data["only_b"] == []
    md = _compare(plain, bumped).stdout
    assert "- `six`: `six==1.17.0` -> `six==1.16.0`" in md.splitlines()


def test_an_unresolvable_pin_stops_before_anything_is_built(
        pinned: tuple[Path, Path, Path]) -> None:
    plain, _, reports = pinned
    matrix = str(plain.parent.parent.parent / "pinned.yaml")
    venvs = Path(json.loads((plain / "manifest.json").read_text())["python"]).parents[2]
    built = sorted(venvs.iterdir())
    runs = set(reports.glob("*/*"))
    done = harness("run", "--matrix", matrix, "--suite", "record", "--pin", "six==0.0.0.999",
                   "--reports",
                   str(reports))
    assert done.returncode == 3
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("harness: error: --pin six==0.0.0.999: pip cannot resolve "
                                  "it here (")
    assert done.stderr.strip().endswith("; nothing was built")
    assert sorted(venvs.iterdir()) == built and set(reports.glob("*/*")) == runs


def test_two_lanes_are_compared_with_a_warning(nights: tuple[Path, Path],
                                               pinned: tuple[Path, Path, Path]) -> None:
    done = _compare(nights[0], pinned[0])
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        f"harness: warning: {nights[0]} is a run of compare, {pinned[0]} of pinned: comparing "
        "two lanes"]
    assert "Two lanes are compared here" in done.stdout


def test_a_repro_of_a_pinned_run_uses_its_pinned_environment(
        pinned: tuple[Path, Path, Path]) -> None:
    """matrix.json holds the pins, so repro builds (here: names) the run's own environment."""
    plain, bumped, _ = pinned
    python = json.loads((bumped / "manifest.json").read_text())["python"]
    done = harness("repro", str(bumped), "--test", "test_first_passes", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert '+   "six==1.16.0"' in done.stdout  # the recorded matrix, against the current one
    (command,) = [line for line in done.stdout.splitlines() if line.startswith("[record] ")]
    assert f" {python} -m pytest " in command
    assert python != json.loads((plain / "manifest.json").read_text())["python"]
