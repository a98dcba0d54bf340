"""Which release of an engine a source tree's tests come from: what ``harness import
buildkite`` records on each suite it writes (``tests_from``), so that a run can hold it
against the engine its lane installs (run/releases.py).

An sdist says it in ``PKG-INFO`` (``Name:``, ``Version:``): ``vllm==0.34.0``. A git
checkout says its commit: ``vllm@<sha>`` (the name from its pyproject.toml). A tree with
neither records nothing, said in one line; a version that is not one (PEP 440) is bad
input, one line naming the file, line and key.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness.errors import UsageError

_HEADER = re.compile(r"^(Name|Version):\s*(.*?)\s*$")


def source_release(source: Path) -> str | None:
    """``NAME==VERSION`` from an sdist's PKG-INFO, ``NAME@COMMIT`` from a git checkout,
    or None (neither)."""
    info = source / "PKG-INFO"
    if info.is_file():
        return _from_pkg_info(info)
    commit = _commit(source)
    name = _project_name(source)
    return f"{name}@{commit}" if commit and name else None


def _from_pkg_info(info: Path) -> str | None:
    found: dict[str, tuple[str, int]] = {}
    for at, line in enumerate(info.read_text(encoding="utf-8", errors="replace")
                              .splitlines(), start=1):
        if not line.strip():
            break  # the headers end at the first blank line
        if (match := _HEADER.match(line)) and match.group(1) not in found:
            found[match.group(1)] = (match.group(2), at)
    if "Name" not in found or "Version" not in found:
        return None
    version, number = found["Version"]
    try:
        Version(version)
    except InvalidVersion:
        raise UsageError(f"{info}:{number}: Version: {version!r} is not a version (PEP 440); "
                         "nothing was written") from None
    return f"{found['Name'][0]}=={version}"


def _commit(source: Path) -> str | None:
    if not (source / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", sha) else None


def _project_name(source: Path) -> str | None:
    try:
        data = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    name = data.get("project", {}).get("name")
    return name if isinstance(name, str) and name else None
