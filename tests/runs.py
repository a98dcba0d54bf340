"""Run folders that ``harness run`` really wrote, made once per test session.

Consumers of run folders (ingest, report, repro, shard durations) are tested on these,
never on hand-built manifests: a hand-built folder is only for bad-input cases.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = "tests/data/suites/record/check_record.py"


@dataclass(frozen=True)
class Runs:
    reports: Path  # reports/<matrix>/<run-id>/ for every run below
    passing: Path
    failing: Path
    crashed: Path
    shards: tuple[Path, Path]
    emulated: Path  # the same suite under the rocm profile, --emulate

    def as_dict(self) -> dict[str, object]:
        return {"reports": str(self.reports), "passing": str(self.passing),
                "failing": str(self.failing), "crashed": str(self.crashed),
                "shards": [str(p) for p in self.shards], "emulated": str(self.emulated)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Runs:
        first, second = (Path(p) for p in data["shards"])
        return cls(Path(data["reports"]), Path(data["passing"]), Path(data["failing"]),
                   Path(data["crashed"]), (first, second), Path(data["emulated"]))

    @property
    def all(self) -> list[Path]:
        return [self.passing, self.failing, self.crashed, *self.shards, self.emulated]


def _nightly_day() -> Any:
    spec = importlib.util.spec_from_file_location("nightly_day", ROOT / "ci" / "nightly_day.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_matrix(folder: Path, name: str = "record", extends: str = "cpu.yaml") -> Path:
    """The user matrix of ci/nightly_day.py (one definition for both)."""
    path: Path = _nightly_day().user_matrix(folder, name, extends)
    return path


def own_suites_matrix(path: Path, name: str, suites: list[str], *,
                      top: tuple[str, ...] = ()) -> Path:
    """A matrix extending cpu.yaml with the cpu lane's own suites off and ``suites`` (YAML
    lines, ``"  name: {path: ..., ...}"``) instead; ``top``: more top-level lines."""
    path.write_text("\n".join([
        "extends: cpu.yaml", f"name: {name}", *top, "suites:",
        *(f"  {own}: {{enabled: false}}" for own in ("platform", "kernel_parity", "fusion",
                                                      "e2e")),
        *suites,
    ]) + "\n")
    return path


def harness(*args: str, env: dict[str, str] | None = None,
            cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, **(env or {})},
    )


def named_run_folder(stdout: str) -> Path:
    """The run folder a ``harness run`` names on its last lines (``run folder: ...``): the
    one it wrote, whatever else its reports folder holds (another run of the same second
    can sort after it by name)."""
    (folder,) = (Path(line.removeprefix("run folder: ")) for line in stdout.splitlines()
                 if line.startswith("run folder: "))
    return folder


def run_once(matrix: Path, reports: Path, mode: str, *extra: str) -> Path:
    before = set((reports / matrix.stem).glob("*")) if (reports / matrix.stem).is_dir() else set()
    done = harness("run", "--matrix", str(matrix), "--suite", "record", "--python", "current",
                   "--reports", str(reports), *extra, env={"RECORD_MODE": mode})
    expected = {"pass": 0, "fail": 1, "crash": 4}[mode]  # os.abort(): a finding
    assert done.returncode == expected, done.stdout[-3000:] + done.stderr[-2000:]
    (new,) = set((reports / matrix.stem).glob("*")) - before
    return new


def make_runs(folder: Path) -> Runs:
    matrix = write_matrix(folder)
    reports = folder / "reports"
    passing = run_once(matrix, reports, "pass")
    failing = run_once(matrix, reports, "fail")
    crashed = run_once(matrix, reports, "crash")
    shard1 = run_once(matrix, reports, "pass", "--shard", "1/2")
    shard2 = run_once(matrix, reports, "pass", "--shard", "2/2")
    rocm = write_matrix(folder, "record-rocm", "rocm.yaml")
    emulated = run_once(rocm, reports, "pass", "--emulate")
    return Runs(reports, passing, failing, crashed, (shard1, shard2), emulated)


def copy_runs(runs: Runs, into: Path) -> Runs:
    """A private copy, for a test that changes files."""
    shutil.copytree(runs.reports, into / "reports")

    def moved(path: Path) -> Path:
        return into / "reports" / path.relative_to(runs.reports)

    return Runs(into / "reports", moved(runs.passing), moved(runs.failing), moved(runs.crashed),
                (moved(runs.shards[0]), moved(runs.shards[1])), moved(runs.emulated))
