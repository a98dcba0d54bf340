"""Where a suite's ``path``, ``rootdir`` and ``cwd`` point, decided once when a matrix loads;
and where a suite runs (:func:`suite_place`), decided once for the plan, ``harness select
--collect``, ``harness repro`` and ``harness run --test``.

A value may start with ``~`` or use ``${VAR}``. An absolute value stays as it is. A
relative one is read against the folder of the matrix file that wrote it when that file
lives outside the repository and the path exists there (a user's own matrix next to their
own tests); otherwise against the repository, as the shipped matrices write them. The
resolved matrix keeps repository-relative values relative, and so a shipped matrix's suite
that an installed harness brings (its shipped root), so that a matrix hashes the same on
every machine and a run folder's matrix repros on one where harness is installed elsewhere;
it writes every other value absolute. A relative value is found where it is used as
``roots.locate`` finds it: under the project root, else under the shipped root.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError
from harness.matrix.model import Suite
from harness.matrix.yamlsafe import LDict
from harness.roots import base_of, locate, shipped_root

PATH_KEYS = ("path", "rootdir", "cwd")


def _expand(raw: str, *, file: str | None, line: int | None, key: str) -> str:
    expanded = os.path.expandvars(os.path.expanduser(raw))
    if "$" in expanded:
        raise ConfigError(
            f"{raw!r} names an environment variable that is not set", file=file, line=line, key=key
        )
    return expanded


def resolve_one(
    raw: str, *, writer: Path | None, root: Path, file: str | None, line: int | None, key: str
) -> str:
    """One suite path as the resolved matrix records it (see the module docstring)."""
    text = _expand(raw, file=file, line=line, key=key)
    value = Path(text)
    if not value.is_absolute():
        outside = writer is not None and not _inside(writer, root)
        shipped = _shipped_root()
        if outside and writer is not None and (writer.parent / value).exists():
            value = writer.parent / value
        elif (
            outside
            and writer is not None
            and _inside(writer, shipped)
            and not (root / value).exists()
            and (shipped / value).exists()
        ):
            # A shipped matrix's suite, in an installed harness: kept relative, as the
            # checkout's are, and found where it is run (roots.locate: the project, else
            # the shipped root), so the matrix hashes and repros alike wherever harness
            # is installed.
            return Path(os.path.normpath(value)).as_posix()
        else:
            value = root / value
    value = Path(os.path.normpath(value))
    inside = _relative(value, root)
    return inside if inside is not None else str(value)


def _shipped_root() -> Path:
    return shipped_root()


def _relative(path: Path, root: Path) -> str | None:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def _inside(path: Path, root: Path) -> bool:
    return _relative(path, root) is not None


def resolve_suite_paths(
    resolved: dict[str, object], merged: LDict, located: Mapping[str, Path], root: Path
) -> None:
    """Rewrite ``resolved['suites'][*][path|rootdir|cwd]`` in place; ConfigError on a bad one."""
    suites = resolved.get("suites")
    source = merged.get("suites")
    if not isinstance(suites, dict) or not isinstance(source, LDict):
        return
    for name, entry in suites.items():
        where_entry = source.get(name)
        if not isinstance(entry, dict) or not isinstance(where_entry, LDict):
            continue
        for key in PATH_KEYS:
            raw = entry.get(key)
            if not isinstance(raw, str):
                continue
            file, line = where_entry.where(key)
            entry[key] = resolve_one(
                raw,
                writer=located.get(file or ""),
                root=root,
                file=file,
                line=line,
                key=f"suites.{name}.{key}",
            )


def suite_target(value: str, root: Path) -> Path:
    """Where a suite's resolved ``path``, ``rootdir`` or ``cwd`` is on this machine: a
    relative value under the project root, else under the shipped root (a shipped suite of
    an installed harness); the plan, repro and select find a suite through this alone."""
    return locate(value, root)


def suite_folder(value: str, root: Path) -> Path:
    """The folder of a suite whose resolved ``path`` is ``value`` (a folder, or a test file
    in one), as the plan finds it."""
    path = suite_target(value, root)
    return path if path.is_dir() else path.parent


@dataclass(frozen=True, kw_only=True)
class SuitePlace:
    """Where a suite's tests are (``target``), which folder its node ids (and the known
    failures' ids) are relative to (``rootdir``, pytest's ``--rootdir``), the folder its
    pytest starts in (``cwd``; None: the caller's own), and whether it lives under a root
    harness knows (the project's, or the shipped one)."""

    target: Path
    rootdir: Path
    cwd: Path | None
    inside: bool


def suite_place(suite: Suite, root: Path) -> SuitePlace:
    """Where ``suite`` runs. A suite under the project root (or the shipped root: a shipped
    suite of an installed harness) keeps that root as rootdir (the shipped known_failures
    ids say ``suites/...``); one outside both defaults to its own folder, as plain
    ``pytest`` run there would choose without an ini file, and runs there."""
    target = suite_target(suite.path, root)
    base = base_of(target, root)
    inside = target.resolve().is_relative_to(base.resolve())
    if suite.rootdir:
        rootdir = suite_target(suite.rootdir, root)
    elif inside:
        rootdir = base
    else:
        rootdir = target if target.is_dir() or not target.suffix else target.parent
    cwd = suite_target(suite.cwd, root) if suite.cwd else (None if inside else rootdir)
    return SuitePlace(target=target, rootdir=rootdir, cwd=cwd, inside=inside)


def suite_places(suites: Mapping[str, Suite], root: Path) -> dict[str, SuitePlace]:
    """:func:`suite_place` of each suite, by name."""
    return {name: suite_place(suite, root) for name, suite in suites.items()}
