"""An engine's source change: which files of the engine differ, and which lines of each.

``--engine-source TREE --engine-change CHANGE``: TREE is the engine's source as the lanes'
runs had it (a folder, or an sdist); CHANGE is

- a unified diff (``*.diff`` / ``*.patch``: ``git diff``, ``diff -ru``), read from its
  headers and hunks;
- another folder or sdist (the changed side), compared file by file;
- a revision of TREE when TREE is a git checkout: the change since the merge base of the
  revision and HEAD, as ``--changed-since`` reads the harness's own checkout.

The lines are the base side's (the tree the map is read from), per file; ``None`` where a
file was added, removed, or is not text. An sdist is unpacked once into the harness cache,
keyed by its bytes' hash.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import shutil
import tarfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UsageError
from harness.process.git import git
from harness.select.imports import harness_cache

ARCHIVES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz", ".zip")
DIFFS = (".diff", ".patch")
Lines = tuple[tuple[int, int], ...] | None
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


@dataclass(frozen=True, kw_only=True)
class EngineChange:
    source: Path  # the base tree (unpacked)
    label: str  # what the user named, for messages
    changed: Mapping[str, Lines]  # file -> base-side line ranges (None: whole file)
    added: frozenset[str]  # files the base tree lacks
    release: str | None  # the base tree's version (PKG-INFO, the package's version file)
    name: str | None  # the engine's distribution name (PKG-INFO's Name)


def cache_dir() -> Path:
    return harness_cache() / "engine-src"


def _is_archive(path: Path) -> bool:
    return path.is_file() and path.name.endswith(ARCHIVES)


def unpack(path: Path) -> Path:
    """A folder holding the tree ``path`` names (a folder as it is; an archive unpacked
    once, its single top folder stepped into)."""
    if path.is_dir():
        return path
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    target = cache_dir() / digest.hexdigest()[:16]
    if not (target / ".complete").is_file():
        scratch = target.with_name(target.name + f".part{os.getpid()}")
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        try:
            if path.name.endswith(".zip"):
                with zipfile.ZipFile(path) as archive:
                    archive.extractall(scratch)
            else:
                with tarfile.open(path) as archive:
                    archive.extractall(scratch, filter="data")
        except (OSError, tarfile.TarError, zipfile.BadZipFile) as error:
            shutil.rmtree(scratch, ignore_errors=True)
            raise UsageError(f"{path}: not a readable source archive ({error})") from None
        shutil.rmtree(target, ignore_errors=True)
        scratch.rename(target)
        (target / ".complete").write_text(str(path.name) + "\n", encoding="utf-8")
    tops = [p for p in target.iterdir() if p.name != ".complete"]
    return tops[0] if len(tops) == 1 and tops[0].is_dir() else target


def _tree(label: str) -> Path:
    path = Path(label)
    if not path.exists():
        raise UsageError(f"--engine-source {label}: no such folder or archive")
    if not (path.is_dir() or _is_archive(path)):
        raise UsageError(f"--engine-source {label}: expected a source folder or an sdist "
                         f"({', '.join(ARCHIVES)})")
    return unpack(path)


def metadata(root: Path) -> tuple[str | None, str | None]:
    """(distribution name, version) of a tree: its PKG-INFO, else its package's
    ``version.py`` / ``_version.py``."""
    info = root / "PKG-INFO"
    if info.is_file():
        text = info.read_text(encoding="utf-8", errors="replace")
        name = re.search(r"^Name:\s*(\S+)", text, re.M)
        version = re.search(r"^Version:\s*(\S+)", text, re.M)
        return (name.group(1) if name else None, version.group(1) if version else None)
    for candidate in sorted(root.glob("*/_version.py")) + sorted(root.glob("*/version.py")):
        found = re.search(r"""__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""",
                          candidate.read_text(encoding="utf-8", errors="replace"))
        if found:
            return candidate.parent.name, found.group(1)
    return None, None


def parse_diff(text: str, base: Path) -> tuple[dict[str, Lines], set[str]]:
    """The files of a unified diff, each with the base-side lines it removes or replaces
    (an insertion counts the lines either side of it; context lines do not count), and
    those it adds."""
    changed: dict[str, Lines] = {}
    added: set[str] = set()
    current: str | None = None
    old_line = 0
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _diff_path(line[4:]), _diff_path(lines[i + 1][4:])
            current = None
            if old == "/dev/null":
                path = _in_tree(new, base)
                added.add(path)
                changed[path] = None
            elif new == "/dev/null":
                changed[_in_tree(old, base)] = None
            else:
                current = _in_tree(old, base)
                changed.setdefault(current, ())
            continue
        hunk = _HUNK.match(line)
        if hunk:
            old_line = int(hunk.group(1)) if hunk.group(2) != "0" else int(hunk.group(1)) + 1
            continue
        binary = re.match(r"Binary files (\S+) and (\S+) differ", line)
        if binary:
            old, new = _diff_path(binary.group(1)), _diff_path(binary.group(2))
            path = _in_tree(new if old == "/dev/null" else old, base)
            changed[path] = None
            if old == "/dev/null":
                added.add(path)
            continue
        if current is None or changed[current] is None or not line:
            continue  # outside a text file's hunks (its "+++ " line, a mode line)
        previous = lines[i - 1][:1]
        if line[0] == " ":
            old_line += 1
        elif line[0] == "-":
            _touch(changed, current, old_line, old_line)
            old_line += 1
        elif line[0] == "+" and previous not in ("-", "+"):
            # an insertion between two lines: both count
            _touch(changed, current, max(old_line - 1, 1), old_line)
    return changed, added


def _touch(changed: dict[str, Lines], path: str, first: int, last: int) -> None:
    spans = list(changed[path] or ())
    if spans and spans[-1][1] >= first - 1:
        spans[-1] = (spans[-1][0], max(spans[-1][1], last))
    else:
        spans.append((first, last))
    changed[path] = tuple(spans)


def _diff_path(text: str) -> str:
    """The path of a ``---`` / ``+++`` line (``diff -u`` puts a timestamp after a tab)."""
    return text.split("\t", 1)[0].strip()


def _in_tree(path: str, base: Path) -> str:
    """A diff's path relative to ``base``: git names its files under ``a/`` and ``b/``,
    ``diff -ru vllm-0.32.0/ vllm-0.34.0/`` under each tree's top folder; that first folder
    is dropped where the path is not in the tree as it is."""
    if (base / path).exists() or "/" not in path:
        return path
    rest = path.split("/", 1)[1]
    return rest if (base / rest).exists() or not (base / path).parent.exists() else path


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in
                                       p.relative_to(root).parts) and p.name != "PKG-INFO"}


def compare_trees(base: Path, other: Path) -> tuple[dict[str, Lines], set[str]]:
    old, new = _files(base), _files(other)
    changed: dict[str, Lines] = {}
    added = set(new) - set(old)
    for path in sorted(set(old) | set(new)):
        if path not in old or path not in new:
            changed[path] = None
            continue
        a, b = old[path], new[path]
        if a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes():
            continue
        changed[path] = _line_spans(a, b)
    return changed, added


def _line_spans(a: Path, b: Path) -> Lines:
    """The base-side lines ``b`` changes of ``a`` (None for a file that is not text); an
    insertion counts the lines either side of it, as parse_diff does."""
    try:
        left_bytes, right_bytes = a.read_bytes(), b.read_bytes()
        if b"\0" in left_bytes or b"\0" in right_bytes:
            return None
        left = left_bytes.decode("utf-8").splitlines()
        right = right_bytes.decode("utf-8").splitlines()
    except (UnicodeDecodeError, OSError):
        return None
    spans = []
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, left, right,
                                                     autojunk=False).get_opcodes():
        if tag == "insert":
            spans.append((max(i1, 1), i1 + 1))
        elif tag != "equal":
            spans.append((i1 + 1, i2))
    return tuple(spans)


def read_change(source: str, change: str) -> EngineChange:
    """The change ``change`` makes to the engine tree ``source`` (see the module's doc)."""
    base = _tree(source)
    target = Path(change)
    if target.is_file() and target.name.endswith(DIFFS):
        changed, added = parse_diff(target.read_text(encoding="utf-8", errors="replace"), base)
    elif target.is_dir() or _is_archive(target):
        changed, added = compare_trees(base, unpack(target))
    elif (base / ".git").exists():
        changed, added = _git_change(base, change)
    else:
        raise UsageError(f"--engine-change {change}: expected a diff ({', '.join(DIFFS)}), a "
                         f"source folder or sdist, or a revision of a git checkout "
                         f"(--engine-source {source} is not one)")
    name, release = metadata(base)
    return EngineChange(source=base, label=source, changed=changed, added=frozenset(added),
                        release=release, name=name)


def _git_change(root: Path, ref: str) -> tuple[dict[str, Lines], set[str]]:
    from harness.select.changes import merge_base

    commit = merge_base(root, ref)
    return parse_diff(git(root, "diff", "-U0", "--no-renames", "--no-color", commit, "--",
                          timeout_s=120), root)
