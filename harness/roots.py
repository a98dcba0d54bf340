"""Where things are: the user's project root, and what the harness ships.

Two roots:

- the **project root** (``project_root()``): the user's project, whose ``matrices/`` and
  suites come first and whose ``reports/`` hold run folders and the history. Found from
  ``--root`` (which sets ``HARNESS_ROOT``), else ``$HARNESS_ROOT``, else the nearest
  folder at or above the working directory with a ``harness.toml`` or a
  ``pyproject.toml`` that has a ``[tool.harness]`` table, else the checkout this
  package lives in (an editable install), else the working directory.
- the **shipped root** (``shipped_root()``): the matrices, suites, images and CI
  templates that come with the harness. In a checkout that is the checkout; in an
  installed wheel it is ``harness/_shipped`` (setup.py copies them in).

A relative path in a matrix (a suite, a Dockerfile) is looked up under the project root
first, then under the shipped root (``locate``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from pathlib import Path

from harness.errors import ConfigError

SHIPPED = ("matrices", "suites", "images", "ci/templates")
_PACKAGE = Path(__file__).resolve().parent
_TOOL_TABLE = re.compile(r"^\s*\[tool\.harness(\.[A-Za-z0-9_-]+)?\]\s*$", re.MULTILINE)


def checkout_root() -> Path | None:
    """The source checkout this package runs from (an editable install), if any."""
    here = _PACKAGE.parent
    if (here / "matrices").is_dir() and (here / "suites").is_dir():
        return here
    return None


def shipped_root() -> Path:
    return checkout_root() or _PACKAGE / "_shipped"


def _declares_project(folder: Path) -> bool:
    if (folder / "harness.toml").is_file():
        return True
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        return False
    try:
        return bool(_TOOL_TABLE.search(pyproject.read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return False


def find_project(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` that declares a harness project."""
    for folder in (start, *start.parents):
        if _declares_project(folder):
            return folder
    return None


def project_root() -> Path:
    env = os.environ.get("HARNESS_ROOT")
    if env:
        root = Path(env).expanduser().resolve()
        if not root.is_dir():
            raise ConfigError(f"HARNESS_ROOT={env}: no such folder")
        return root
    cwd = Path.cwd().resolve()
    return find_project(cwd) or checkout_root() or cwd


def matrix_dirs(root: Path) -> list[Path]:
    """Where matrices are looked up by name: the project's, then the shipped ones."""
    dirs = [root / "matrices", shipped_root() / "matrices"]
    out: list[Path] = []
    for d in dirs:
        if d.resolve() not in [o.resolve() for o in out]:
            out.append(d)
    return out


def locate(rel: str, root: Path) -> Path:
    """A matrix's relative path under the project root, else under the shipped root."""
    path = Path(rel)
    if path.is_absolute():
        return path
    mine = root / path
    if mine.exists():
        return mine
    shipped = shipped_root() / path
    return shipped if shipped.exists() else mine


def base_of(path: Path, root: Path) -> Path:
    """The root a located path lives under (the project's or the shipped one)."""
    for candidate in (root, shipped_root()):
        try:
            path.resolve().relative_to(candidate.resolve())
            return candidate
        except ValueError:
            continue
    return root


def import_path(cache: Path) -> Path:
    """A folder that makes ``harness`` and ``refengine`` (and nothing else) importable.

    In a checkout that is the checkout. In an installed wheel the packages sit in a
    site-packages beside everything else installed there (torch included), which must
    not shadow the matrix's environment: link just the two packages from a folder of
    their own.
    """
    checkout = checkout_root()
    if checkout is not None:
        return checkout
    sources = {"harness": _PACKAGE}
    spec = importlib.util.find_spec("refengine")
    if spec is not None and spec.submodule_search_locations:
        sources["refengine"] = Path(next(iter(spec.submodule_search_locations))).resolve()
    key = hashlib.sha256(str(sorted(sources.items())).encode()).hexdigest()[:16]
    folder = cache / "pythonpath" / key
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in sources.items():
        link = folder / name
        if link.is_symlink() and link.resolve() == source:
            continue
        tmp = folder / f".{name}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(source, target_is_directory=True)
        os.replace(tmp, link)
    return folder
