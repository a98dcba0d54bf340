"""``harness report compare`` on the speed of run folders ``harness run`` wrote: the torch
provider's silu_and_mul parity cases under the cpu matrix, once from this project and once
from a scratch copy where silu_and_mul computes its float32 result four times over (the
same answer, four times the work). The speed tier times each op's first case per provider
and dtype against the native baseline: the float32 one is slower in B, float16 and
bfloat16 are the control. The rules at each side are tests/unit/test_compare_speed_rules.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from scratch_repo import SKIP

from tests.runs import ROOT, harness

KERNEL = "refengine/providers/torch_provider.py"
GOOD_LINE = "    return F.silu(x[..., :d]) * x[..., d:]\n"
SLOW_LINES = ("    out = F.silu(x[..., :d]) * x[..., d:]\n"
              "    for _ in range(3 if x.dtype == torch.float32 else 0):  # the same, again\n"
              "        out = F.silu(x[..., :d]) * x[..., d:]\n"
              "    return out\n")
SLOWED = "-float32-torch-cpu]"  # the speed tier's float32 case: 2d-odd-float32
CONTROL = ("-float16-torch-cpu]", "-bfloat16-torch-cpu]")


def _run(reports: Path, cwd: Path, env: dict[str, str] | None = None) -> Path:
    before = set(reports.glob("*/*"))
    done = harness("run", "--matrix", "cpu", "--suite", "kernel_parity", "-k",
                   "silu_and_mul and torch and not inductor", "--python", "current",
                   "--reports", str(reports), cwd=cwd, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    (new,) = set(reports.glob("*/*")) - before
    return new


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(A: this project, B: silu_and_mul's float32 four times over, C: speed off)."""
    folder = tmp_path_factory.mktemp("speed")
    slow = folder / "slow"
    shutil.copytree(ROOT, slow, ignore=SKIP)
    kernel = slow / KERNEL
    assert kernel.read_text().count(GOOD_LINE) == 1
    kernel.write_text(kernel.read_text().replace(GOOD_LINE, SLOW_LINES))
    reports = folder / "reports"
    return (_run(reports, ROOT), _run(reports, slow),
            _run(reports, ROOT, env={"HARNESS_SPEED": "off"}))


def _compare(*args: object) -> subprocess.CompletedProcess[str]:
    done = harness("report", "compare", *map(str, args))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done


def test_the_slowed_case_is_slower_and_the_others_are_not(runs: tuple[Path, Path, Path]) -> None:
    a, b, _ = runs
    data = json.loads(_compare(a, b, "--format", "json").stdout)
    assert data["speed_margin"] == 1.25
    assert data["speed_compared"] == 3 and data["speed_one_side"] == 0  # one case per dtype
    assert data["a"]["speed_cases"] == 3 and data["a"]["speed_skipped"] == []
    slower = {c["nodeid"]: c for c in data["speed_slower"]}
    (slowed,) = [c for nodeid, c in slower.items() if nodeid.endswith(SLOWED)]
    assert slowed["nodeid"].startswith("suites/kernel_parity/test_parity.py::test_parity[")
    assert slowed["factor"] >= 2 and slowed["after"] == pytest.approx(
        slowed["before"] * slowed["factor"], rel=1e-6)
    assert data["outcomes"] == [] and data["unchanged"] is False
    # the control, at a margin the work done four times clears and the noise does not
    wide = json.loads(_compare(a, b, "--format", "json", "--speed-margin", "2").stdout)
    assert [c["nodeid"] for c in wide["speed_slower"]] == [slowed["nodeid"]]
    assert not any(c["nodeid"].endswith(CONTROL) for c in wide["speed_slower"])
    assert wide["speed_faster"] == []


def test_the_markdown_lists_it_under_slower(runs: tuple[Path, Path, Path]) -> None:
    a, b, _ = runs
    md = _compare(a, b, "--speed-margin", "2").stdout
    section = md.split("## Speed\n", 1)[1].split("\n## ", 1)[0]
    assert "3 case(s) with a speed ratio" in section and "a factor of 2 or more" in section
    slower = section.split("### Slower in B (1)\n\n", 1)[1].split("\n\n", 1)[0]
    assert slower.startswith("- `kernel_parity::suites/kernel_parity/test_parity.py::"
                             "test_parity[silu_and_mul-") and f"{SLOWED}`: " in slower
    assert "### Faster in B (0)\n\nNone." in section


def test_a_run_with_speed_off_says_why(runs: tuple[Path, Path, Path]) -> None:
    a, _, off = runs
    data = json.loads(_compare(a, off, "--format", "json").stdout)
    assert data["speed_compared"] == 0 and data["speed_one_side"] == 3
    assert data["b"]["speed_cases"] == 0 and data["b"]["speed_skipped"] == ["HARNESS_SPEED=off"]
    md = _compare(a, off).stdout
    assert "Run B recorded no speed: 3 of its cases say why not:\n\n- `HARNESS_SPEED=off`" in md
