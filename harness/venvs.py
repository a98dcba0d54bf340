"""Per-matrix virtual environments built from the matrix's ``python`` pins.

Keyed by a hash of the pins and the interpreter, so an unchanged matrix reuses its
environment at once. A marker file is written last, so an interrupted build is never
mistaken for a finished one.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.errors import InfraError

# What the plugin and the suites' runner need besides the matrix's own pins; pinned to
# the versions the harness runs with, so the venv runs the same pytest.
RUNTIME_PACKAGES = ("pytest", "pytest-xdist", "pytest-timeout", "pyyaml")


def runtime_pins() -> list[str]:
    pins = []
    for name in RUNTIME_PACKAGES:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pins.append(name)
    return pins


def venv_key(matrix: Any) -> str:
    text = "\n".join([sys.version, *sorted(matrix.python.requirements), *runtime_pins()])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def venv_root(cache_root: Path) -> Path:
    return cache_root / "venvs"


def venv_python(path: Path) -> Path:
    return path / "bin" / "python"


def ensure_venv(matrix: Any, cache_root: Path, *, echo: bool = True) -> Path:
    """Return the interpreter of the matrix's venv, building it if needed.

    Two jobs sharing the cache build it once: the second waits on the lock, then finds
    the first one's finished environment.
    """
    from harness.filelock import file_lock

    lock = venv_root(cache_root) / f".{matrix.name}.lock"
    with file_lock(lock, f"building the {matrix.name} environment"):
        return _ensure_venv_locked(matrix, cache_root, echo=echo)


def _ensure_venv_locked(matrix: Any, cache_root: Path, *, echo: bool = True) -> Path:
    target = venv_root(cache_root) / f"{matrix.name}-{venv_key(matrix)}"
    marker = target / ".harness-complete"
    if marker.is_file():
        return venv_python(target)
    # No marker: absent, or an earlier build was interrupted. Start clean.
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    if echo:
        print(f"harness: building the {matrix.name} environment in {target} (once per pins)")
    requirements = [*matrix.python.requirements, *runtime_pins()]
    try:
        _check([sys.executable, "-m", "venv", str(target)], "create the virtualenv")
        _check(
            [
                str(venv_python(target)),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                *requirements,
            ],
            f"install {' '.join(matrix.python.requirements)}",
        )
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    marker.write_text("\n".join(requirements) + "\n")
    return venv_python(target)


def _check(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise InfraError(f"could not {what}: {' | '.join(tail)}")
