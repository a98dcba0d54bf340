"""A scratch engine for the tests that need one: this project copied into a new git
repository (bisect over commits, speed over nights), and a pure-Python wheel of a made-up
engine written by hand (bisect over releases, offline)."""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = shutil.ignore_patterns(".git", ".venv", "reports", "__pycache__", ".mypy_cache",
                              ".ruff_cache", "*.egg-info", ".harness-cache")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c",
                           "user.email=t@t", *args], check=True, capture_output=True,
                          text=True).stdout


def commit(repo: Path, message: str) -> str:
    """Everything in ``repo`` committed; the new commit's sha."""
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD").strip()


def copy_project(repo: Path) -> Path:
    """This project (no .git, no environment, no reports) as a new git repository."""
    shutil.copytree(ROOT, repo, ignore=SKIP)
    git(repo, "init", "-q")
    return repo


def wheel(folder: Path, package: str, version: str, body: str) -> Path:
    """A pure-Python wheel of ``package`` (its module the name with ``_``), no build
    backend: ``body`` is its ``__init__.py``."""
    module = package.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": body,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: harness-tests\n"
                         "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }

    def digest(text: str) -> str:
        raw = hashlib.sha256(text.encode()).digest()
        return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    record = "".join(f"{path},{digest(text)},{len(text.encode())}\n"
                     for path, text in files.items()) + f"{info}/RECORD,,\n"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            whl.writestr(name, text)
    return path


def bisect(reports: Path, test: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``harness bisect`` of ``test`` on the cpu matrix, this interpreter, its step folders
    under ``reports``: what it printed, and its exit."""
    return subprocess.run(
        [sys.executable, "-m", "harness", "bisect", "--matrix", "cpu", "--test", test,
         "--python", "current", "--reports", str(reports), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
