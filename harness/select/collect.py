"""The test ids of a lane, by pytest's own collection (``harness select --collect``).

Collected in the given interpreter with the lane's matrix (``--platform``), each suite
where a run of the lane runs it (its target, rootdir and folder from
:func:`harness.matrix.suite_paths.suite_place`, as the plan reads them), so the ids are
exactly the ones a run of that lane has, in the environment the caller builds as a run
does (runners/suite_env.py: the command hands it over). A GPU lane is collected here as
written (its ids name its device); collection needs no device.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.errors import InfraError
from harness.matrix.model import Suite
from harness.matrix.suite_paths import suite_place
from harness.process.run import run_captured


def collect(python: str, root: Path, lane: str, suites: Sequence[Suite],
            *, env: Mapping[str, str], timeout_s: float = 600) -> list[str]:
    """One pytest per suite: suites import their own ``conftest`` helpers by that module
    name, which would collide in one process (as in a run, one pytest a suite)."""
    ids: list[str] = []
    for suite in suites:
        ids += _collect_one(python, root, lane, suite, env=env, timeout_s=timeout_s)
    return ids


def _collect_one(python: str, root: Path, lane: str, suite: Suite,
                 *, env: Mapping[str, str], timeout_s: float) -> list[str]:
    place = suite_place(suite, root)
    argv = [python, "-m", "pytest", "--collect-only", "-q", "-p", "harness.pytest_entry",
            "-p", "no:cacheprovider", f"--rootdir={place.rootdir}", "--platform", lane,
            str(place.target)]
    try:
        proc = run_captured(argv, cwd=place.cwd, env=dict(env), timeout_s=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InfraError(f"collecting {lane}: {error}") from None
    ids = [line.strip() for line in proc.stdout.splitlines() if "::" in line]
    if proc.returncode not in (0, 5) or (not ids and proc.returncode != 5):
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        raise InfraError(f"collecting {lane} failed (exit {proc.returncode}): "
                         + " | ".join(tail))
    return ids
