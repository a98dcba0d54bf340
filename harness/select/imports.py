"""The static import graph of the checkout's Python files, cached by file hashes.

Edges are the ``import`` / ``from ... import`` statements that resolve to a file of the
checkout: a dotted name against the repository root, or (as pytest's rootdir-less
test folders allow) against the importing file's own folder. Importing ``a.b.c`` also
runs ``a/__init__.py`` and ``a/b/__init__.py``, so those are edges too. Imports of
names outside the checkout (torch, pytest) are not edges.

String literals that spell a module of the checkout (``"refengine.triton_kernels.norm"``
in a table passed to ``importlib.import_module``) are kept apart as *dynamic* edges:
the selector decides what they mean (a provider table, a kernel table), the closure
does not follow them.

Parsing is the slow part, so each file's parsed names are cached under the harness
cache by its content hash; an unchanged file is never parsed twice.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

CACHE_SCHEMA = 1


def harness_cache() -> Path:
    """Where selection keeps what it read once (the parsed imports, unpacked engine
    sources): ``$XDG_CACHE_HOME/harness``, else ``~/.cache/harness``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "harness"


@dataclass(frozen=True, kw_only=True)
class Parsed:
    """What one file names: imported dotted names and module-like string literals."""

    imports: tuple[str, ...]  # "a.b.c" for both `import a.b.c` and `from a.b import c`
    strings: tuple[str, ...]  # string constants that look like dotted module names
    # (op-like key, dotted string) for dict entries {"key": ("mod.path", ...)} / "mod.path"
    keyed: tuple[tuple[str, str], ...] = ()


def _dotted(text: str) -> bool:
    parts = text.split(".")
    return len(parts) >= 2 and all(p.isidentifier() for p in parts)


def _strings_in(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and _dotted(n.value)]


def parse_source(source: str, package: str) -> Parsed:
    """Parse one file; ``package`` is its dotted package, for relative imports."""
    tree = ast.parse(source)
    imports: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                keep = len(parts) - (node.level - 1)
                prefix = ".".join(parts[:max(keep, 0)])
                base = f"{prefix}.{base}".strip(".") if base else prefix
            for alias in node.names:
                imports.append(f"{base}.{alias.name}" if alias.name != "*" else base)
            if base:
                imports.append(base)
    keyed: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    keyed.extend((key.value, s) for s in _strings_in(value))
    return Parsed(imports=tuple(dict.fromkeys(imports)), strings=tuple(dict.fromkeys(
        _strings_in(tree))), keyed=tuple(dict.fromkeys(keyed)))


@dataclass(kw_only=True)
class ImportGraph:
    root: Path
    files: tuple[str, ...]  # repo-relative posix paths of every .py considered
    static: Mapping[str, frozenset[str]]  # file -> files it imports
    dynamic: Mapping[str, frozenset[str]]  # file -> files its string literals name
    keyed: Mapping[str, tuple[tuple[str, str], ...]]  # file -> (dict key, file named)
    _closures: dict[str, frozenset[str]] = field(default_factory=dict)

    def closure(self, start: str) -> frozenset[str]:
        """``start`` and every file it imports, directly or not (static edges only)."""
        if start not in self._closures:
            seen = {start}
            todo = [start]
            while todo:
                for dep in self.static.get(todo.pop(), ()):
                    if dep not in seen:
                        seen.add(dep)
                        todo.append(dep)
            self._closures[start] = frozenset(seen)
        return self._closures[start]

    def closure_of(self, starts: Iterable[str]) -> frozenset[str]:
        out: set[str] = set()
        for start in starts:
            out |= self.closure(start)
        return frozenset(out)


def _resolve(name: str, here: Path, root: Path, known: set[str]) -> list[str]:
    """Files ``name`` runs on import: each package ``__init__`` on the way, then the module."""
    parts = name.split(".")
    for base in (here, root):
        found: list[str] = []
        for n in range(1, len(parts) + 1):
            stem = base.joinpath(*parts[:n])
            rel_pkg = _rel(stem / "__init__.py", root)
            rel_mod = _rel(stem.with_suffix(".py"), root)
            if rel_pkg in known:
                found.append(rel_pkg)
            elif rel_mod in known:
                found.append(rel_mod)
                break
            else:
                break
        if found:
            return found
    return []


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return ""


def _package_of(rel: str) -> str:
    parts = rel.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1])
    return ".".join(parts[:-1])


def python_files(root: Path, tops: Iterable[str]) -> list[str]:
    out: list[str] = []
    for top in tops:
        base = root / top
        if base.is_file() and base.suffix == ".py":
            out.append(_rel(base, root))
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames
                                 if not d.startswith(".") and d != "__pycache__")
            out.extend(_rel(Path(dirpath) / f, root) for f in sorted(filenames)
                       if f.endswith(".py"))
    return sorted(set(out))


class CacheEntry(TypedDict):
    """One file's names as the cache keeps them, under the hash of its content."""

    package: str
    imports: list[str]
    strings: list[str]
    keyed: list[list[str]]  # [dict key, dotted string]


def _cache_entry(data: bytes, package: str) -> CacheEntry:
    """Parse one file's bytes (in ``package``) into its cache entry."""
    try:
        parsed = parse_source(data.decode("utf-8", "replace"), package)
    except SyntaxError:
        parsed = Parsed(imports=(), strings=())
    return {"package": package, "imports": list(parsed.imports),
            "strings": list(parsed.strings), "keyed": [list(k) for k in parsed.keyed]}


def _load_cache(path: Path | None) -> dict[str, object]:
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # a damaged cache is rebuilt, never trusted
    if not isinstance(data, dict) or data.get("schema") != CACHE_SCHEMA:
        return {}
    entries = data.get("files")
    return entries if isinstance(entries, dict) else {}


def _save_cache(path: Path | None, entries: Mapping[str, object]) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"schema": CACHE_SCHEMA, "files": entries}), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # the cache only saves time


def build_graph(root: Path, tops: Iterable[str], cache: Path | None = None) -> ImportGraph:
    """The graph over the .py files under ``tops`` (repo-relative folders or files)."""
    files = python_files(root, tops)
    known = set(files)
    entries = _load_cache(cache)
    fresh: dict[str, object] = {}
    static: dict[str, frozenset[str]] = {}
    dynamic: dict[str, frozenset[str]] = {}
    keyed: dict[str, tuple[tuple[str, str], ...]] = {}
    for rel in files:
        data = (root / rel).read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        entry = entries.get(digest)
        if not isinstance(entry, dict) or entry.get("package") != _package_of(rel):
            entry = _cache_entry(data, _package_of(rel))
        fresh[digest] = entry
        here = (root / rel).parent
        static[rel] = frozenset(
            f for name in entry["imports"] for f in _resolve(name, here, root, known) if f != rel)
        dynamic[rel] = frozenset(
            _resolve(name, root, root, known)[-1] for name in entry["strings"]
            if _resolve(name, root, root, known))
        keyed[rel] = tuple(
            (key, _resolve(name, root, root, known)[-1]) for key, name in entry["keyed"]
            if _resolve(name, root, root, known))
    if fresh.keys() != entries.keys():
        _save_cache(cache, fresh)
    return ImportGraph(root=root, files=tuple(files), static=static, dynamic=dynamic,
                       keyed=keyed)
