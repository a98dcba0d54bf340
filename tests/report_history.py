"""A nightly history built only from run folders that ``harness run`` wrote.

Seven lanes, each a user matrix (outside the checkout, extending ``cpu`` by name, run
locally with the current interpreter) whose ``runtime.env`` sets the night and the lane for
the suites in tests/data/suites/nightly/. Every lane runs on the last night; ``cpu`` also on
the two nights before it and ``rocm-mi300x`` on the one before. On the last night:

- cpu: ``test_regresses_tonight`` fails (a regression), ``test_fixed_tonight`` passes (a fix),
  ``test_fixed_upstream`` (a quarantined known failure) passes, the ``features`` suite skips
  9 of its 10 tests (it passed before: it started skipping);
- rocm-mi300x: ``test_crashes`` kills pytest mid-suite (an infrastructure failure, new);
- rocm-mi355x declares ``features`` but runs only ``kernels`` (declared, did not run);
- the other lanes do not declare ``features`` at all (blank cells).
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.roots import project_root

ROOT = project_root()
SUITES = "tests/data/suites/nightly"
LAST = 3
# lane -> nights it runs; the order of the lanes is the order of the runs on a night.
LANES = {
    "cpu": (1, 2, 3),
    "rocm-mi300x": (2, 3),
    "rocm-mi355x": (3,),
    "cuda-h100": (3,),
    "xpu-max1550": (3,),
    "zen-genoa": (3,),
    "s390x-z15": (3,),
}
WITH_FEATURES = ("cpu", "rocm-mi355x")  # the lanes that declare the features suite
CRASH = "rocm-mi300x:3"
KNOWN_ID = f"{SUITES}/check_kernels.py::test_fixed_upstream"


@dataclass
class History:
    reports: Path  # reports/<lane>/<run-id>/ as harness run wrote them
    runs: list[Path] = field(default_factory=list)  # oldest first
    before_last: dt.datetime | None = None  # a moment between the last two nights
    exit_codes: dict[tuple[str, int], int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "reports": str(self.reports),
            "runs": [str(run) for run in self.runs],
            "before_last": self.before_last.isoformat() if self.before_last else None,
            "exit_codes": [[lane, night, code] for (lane, night), code in self.exit_codes.items()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> History:
        before = data["before_last"]
        return cls(
            Path(data["reports"]),
            [Path(run) for run in data["runs"]],
            dt.datetime.fromisoformat(before) if before else None,
            {(lane, night): code for lane, night, code in data["exit_codes"]},
        )


def matrix_text(lane: str, night: int) -> str:
    features = lane in WITH_FEATURES
    lines = [
        f"# A user matrix for the nightly-report tests: lane {lane}, night {night}.",
        "extends: cpu.yaml",
        f"name: {lane}",
        "suites:",
        # The shipped suites are not this lane's: it declares only its own.
        *(
            f"  {name}: {{enabled: false}}"
            for name in ("platform", "kernel_parity", "fusion", "e2e")
        ),
        f"  kernels: {{path: {SUITES}/check_kernels.py, workers: 1, timeout_s: 300}}",
    ]
    if features:
        lines.append(
            f"  features: {{path: {SUITES}/check_features.py, workers: 1, timeout_s: 300}}"
        )
    lines += [
        "runtime:",
        f'  env: {{NIGHT: "{night}", LANE: "{lane}", CRASH: "{CRASH}"}}',
    ]
    if lane == "cpu":
        lines += [
            "known_failures:",
            f"  - id: {KNOWN_ID}",
            "    reason: upstream allocator bug",
            '    issue: "#42"',
            "    owner: kernels",
            "    expires: 2099-12-31",
            "    action: quarantine",
        ]
    return "\n".join(lines) + "\n"


def harness_run(matrix: Path, reports: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--matrix",
            str(matrix),
            "--python",
            "current",
            "--local",
            "--reports",
            str(reports),
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def make_history(root: Path) -> History:
    """Run every lane's nights with ``harness run``; return the run folders, oldest first."""
    history = History(root / "reports")
    matrices = root / "matrices"
    matrices.mkdir(parents=True)
    for night in range(1, LAST + 1):
        if night == LAST:
            history.before_last = dt.datetime.now(dt.UTC)
        for lane, nights in LANES.items():
            if night not in nights:
                continue
            matrix = matrices / f"{lane}-night{night}.yaml"
            matrix.write_text(matrix_text(lane, night))
            # rocm-mi355x declares features and does not run it.
            extra = ("--suite", "kernels") if lane == "rocm-mi355x" else ()
            before = set((history.reports / lane).glob("*"))
            done = harness_run(matrix, history.reports, *extra)
            (folder,) = set((history.reports / lane).glob("*")) - before
            history.runs.append(folder)
            history.exit_codes[(lane, night)] = done.returncode
            if done.returncode not in (0, 1, 3):
                raise AssertionError(f"{lane} night {night}: {done.stdout[-2000:]}{done.stderr}")
    return history
