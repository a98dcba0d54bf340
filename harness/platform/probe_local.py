"""Run a matrix's device probe on this machine (the docker runner runs it in the container)."""

from __future__ import annotations

import os
import shutil
import subprocess

from harness.matrix.model import Matrix
from harness.platform.probe import CommandRunner, probe
from harness.process.run import run_captured
from harness.results.facts import DeviceFingerprint

PROBE_TIMEOUT_S = 60


def run_here(argv: list[str]) -> tuple[int, str]:
    """One probe command on this machine: (0, its output), or (non-zero, why not)."""
    if shutil.which(argv[0]) is None:
        return 127, f"{argv[0]} not found"
    try:
        done = run_captured(argv, timeout_s=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return 124, f"{argv[0]} did not answer within {PROBE_TIMEOUT_S} s"
    if done.returncode == 0:
        return 0, done.stdout
    return done.returncode or 1, f"{argv[0]} exited {done.returncode}: {done.stderr.strip()[:200]}"


def run_emulated(matrix: Matrix) -> CommandRunner:
    """Probe commands as the lane's emulated CPU answers them: ``lscpu`` (which reads the
    host's /proc/cpuinfo) from CPUID inside the emulation; anything else here."""
    def run(argv: list[str]) -> tuple[int, str]:
        if argv[:1] != ["lscpu"]:
            return run_here(argv)
        from harness.platform import cpuid
        from harness.platform.cpu_emulation import facts
        from harness.platform.host import EMULATED_ENV

        if os.environ.get(EMULATED_ENV):  # already on it (a suite process): ask CPUID here
            return 0, cpuid.as_lscpu(cpuid.facts())
        return 0, cpuid.as_lscpu(facts(matrix.cpu))
    return run


def probe_and_check(matrix: Matrix, run: CommandRunner | None = None) -> DeviceFingerprint:
    """The matrix's probe, checked against what it expects (InfraError naming the first
    expectation this host does not meet). ``run``: where the probe commands run (default:
    here, or as the lane's emulated CPU answers them)."""
    if run is None:
        run = run_emulated(matrix) if matrix.cpu.emulated else run_here
    return probe(matrix.probe.kind, matrix.probe.expect, run)
