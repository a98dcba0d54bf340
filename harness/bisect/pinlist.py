"""``--pins NAME==V1,V2,...`` or ``--pins NAME==FIRST..LAST`` (every release the package
index offers between the two, asked with ``pip index versions``, the user's pip
configuration applying) -> the pins to try, oldest first."""

from __future__ import annotations

import re
import subprocess
import sys

from packaging.version import InvalidVersion, Version

from harness.errors import InfraError, UsageError
from harness.matrix.requirements import exact_version, split_pin
from harness.process.run import run_captured

_AVAILABLE = re.compile(r"^Available versions:\s*(?P<list>.+)$", re.M)


def _version(text: str, spec: str) -> Version:
    try:
        if not exact_version(text):
            raise InvalidVersion(text)
        return Version(text)
    except InvalidVersion:
        raise UsageError(f"--pins {spec}: {text!r} is not a version") from None


def index_versions(name: str) -> list[str]:
    """Every release of ``name`` the configured index offers (pip's own answer)."""
    argv = [sys.executable, "-m", "pip", "index", "versions", name]
    try:
        done = run_captured(argv, timeout_s=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"--pins: pip index versions {name}: {exc}") from None
    found = _AVAILABLE.search(done.stdout)
    if done.returncode != 0 or found is None:
        last = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise InfraError(f"--pins: pip index versions {name} found none: {last}")
    return [v.strip() for v in found["list"].split(",") if v.strip()]


def expand(spec: str) -> list[str]:
    """The pins of a ``--pins`` value, oldest first; a malformed one is a UsageError."""
    pin = split_pin(spec)
    if pin is None:
        raise UsageError(f"--pins {spec}: expected NAME==V1,V2,... or NAME==FIRST..LAST")
    name, versions = pin.name, pin.versions
    if ".." in versions:
        first, _, last = versions.partition("..")
        low, high = _version(first, spec), _version(last, spec)
        chosen = [v for v in index_versions(name)
                  if not Version(v).is_prerelease and low <= Version(v) <= high]
        if not chosen:
            raise UsageError(f"--pins {spec}: the index has no {name} release in that range")
    else:
        chosen = [v for v in versions.split(",") if v]
        for v in chosen:
            _version(v, spec)
    ordered = sorted(set(chosen), key=Version)
    if len(ordered) < 2:
        raise UsageError(f"--pins {spec}: name two versions or more")
    return [pin.with_version(v) for v in ordered]
