"""Run a matrix's device probe on this machine (the docker runner runs it in the container)."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from harness.errors import InfraError
from harness.matrix.model import Matrix
from harness.platform.probe import COMMANDS, PARSERS, check
from harness.process.run import run_captured

PROBE_TIMEOUT_S = 60


def run_probe(kind: str) -> dict[str, Any]:
    """The fingerprint the probe reports here; InfraError when the tool is absent or fails."""
    if kind == "none":
        return {"kind": "none"}
    attempts = COMMANDS[kind]
    last = ""
    for argv in attempts:
        if shutil.which(argv[0]) is None:
            last = f"{argv[0]} not found"
            continue
        try:
            done = run_captured(argv, timeout_s=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            last = f"{argv[0]} did not answer within {PROBE_TIMEOUT_S} s"
            continue
        if done.returncode == 0:
            return PARSERS[kind](done.stdout)
        last = f"{argv[0]} exited {done.returncode}: {done.stderr.strip()[:200]}"
    raise InfraError(f"probe {kind}: {last}")


def probe_and_check(matrix: Matrix) -> dict[str, Any]:
    fingerprint = run_probe(matrix.probe.kind)
    if matrix.probe.kind != "none":
        check(matrix.probe.kind, matrix.probe.expect, fingerprint)
    return fingerprint
