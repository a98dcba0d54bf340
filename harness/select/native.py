"""An engine's native sources, mapped to the torch ops they can change (no compiler, no
build): what a change to ``csrc/cpu/layernorm.cpp`` can break is ``_C::rms_norm`` and
``_C::fused_add_rms_norm``.

Read from the source tree alone:

- **registrations**: every file that opens a ``TORCH_LIBRARY`` block (``TORCH_LIBRARY``,
  ``_FRAGMENT``, ``_IMPL``, ``_EXPAND``, their ``STABLE_`` forms) names its namespace (a
  ``TORCH_EXTENSION_NAME`` the file ``#define``\\ s, else ``_C``; ``CONCAT(name, _suffix)``
  appends) and, in its ``x.def("op(...)", &fn)`` and ``x.impl("op", key, &fn)`` calls, each
  op's name and the functions that implement it, with the lines each call spans;
- **definitions**: the file that defines each such function (a ``fn(...)`` whose closing
  parenthesis is followed by its body, not a ``;``);
- **the include graph**: ``#include "x"`` resolved against the including file's folder,
  then the native root (``csrc/``), then the tree; an include that names no file but is
  written by a generator script of the tree (vLLM's ``cpu_attn_dispatch_generated.h``,
  made at build time by ``generate_cpu_attn_dispatch.py``) stands for the script and
  the includes the script writes.

An op's files are its definitions' files and everything they include, transitively, plus
the implementation beside each header they include (``dnnl_helper.h`` ->
``dnnl_helper.cpp``). A header the registration file includes that declares an op's
function (vLLM's ``ops.h``) reaches that op. The registration file itself reaches the ops
whose ``def`` / ``impl`` calls (or the declarations of their functions) span the changed
lines; a change elsewhere in it (an ``#include``, a macro, a condition) reaches every op it
registers. A file no rule reaches has no known role: the caller selects everything.

Each op carries the family of the build its registration belongs to (``cpu`` for a file
under a ``cpu/`` folder, else ``gpu``): a CUDA kernel's change does not select the CPU
lanes' tests of an op of the same name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from harness.select.cparse import Registration, declarations, defines, read_registrations

NATIVE_SUFFIXES = frozenset({".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp",
                             ".hxx", ".inc", ".inl", ".ipp"})
HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".ipp"})
GENERATOR_SUFFIXES = frozenset({".py"})

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
class Reach(NamedTuple):
    """An op a file can change, in the build (``cpu`` or ``gpu``) it changes it for."""

    family: str
    op: str


@dataclass(frozen=True, kw_only=True)
class NativeMap:
    """The tree's ops and, for each native file, the ops a change to it can reach."""

    ops: Mapping[str, frozenset[str]]  # op -> the families of the builds registering it
    registrations: Mapping[str, tuple[Registration, ...]]  # registration file -> its calls
    # native file -> (family, op) it reaches: the family of the build whose op it is
    file_ops: Mapping[str, frozenset[Reach]]
    declarations: Mapping[str, Mapping[str, tuple[int, int]]] = field(default_factory=dict)
    # (family, op) -> the files defining its functions: "the op's source file"
    sources: Mapping[Reach, frozenset[str]] = field(default_factory=dict)
    native_root: str = "csrc"

    def is_native(self, path: str) -> bool:
        return Path(path).suffix in NATIVE_SUFFIXES or path in self.file_ops

    def reach(self, path: str, lines: Sequence[tuple[int, int]] | None = None
              ) -> frozenset[Reach] | None:
        """The ops a change to ``path`` (``lines`` of it, 1-based ranges; None: anywhere)
        can change; None when no rule places the file."""
        calls = self.registrations.get(path)
        if calls is not None:
            return self._registration(path, calls, lines)
        return self.file_ops.get(path)

    def _registration(self, path: str, calls: Sequence[Registration],
                      lines: Sequence[tuple[int, int]] | None) -> frozenset[Reach]:
        family = _family(path)
        every = frozenset(Reach(family, c.op) for c in calls) | self.file_ops.get(path, frozenset())
        if lines is None:
            return every
        declared = self.declarations.get(path, {})
        # each line an op's own: its def / impl call, or its function's declaration
        owners: list[tuple[tuple[int, int], frozenset[Reach]]] = [
            (call.lines, frozenset({Reach(family, call.op)})) for call in calls]
        owners += [(span, frozenset(Reach(family, c.op) for c in calls if function in c.functions))
                   for function, span in declared.items()]
        hit: set[Reach] = set()
        for start, end in lines:
            for line in range(start, end + 1):
                mine = [ops for span, ops in owners if span[0] <= line <= span[1]]
                if not mine:
                    return every  # a line no op owns: an include, a macro, the block itself
                hit.update(*mine)
        return frozenset(hit)


@dataclass(kw_only=True)
class _Tree:
    root: Path
    native_root: str
    texts: dict[str, str] = field(default_factory=dict)
    generators: dict[str, str] = field(default_factory=dict)  # script -> text

    def resolve(self, including: str, name: str) -> list[str]:
        """The files an ``#include "name"`` of ``including`` stands for."""
        for base in (str(Path(including).parent), self.native_root, ""):
            candidate = _normal(f"{base}/{name}" if base else name)
            if candidate in self.texts:
                return [candidate]
        # Written at build time by a script of the tree: the script, and what it includes.
        leaf = Path(name).name
        return [script for script, text in self.generators.items() if leaf in text]

    def includes(self, path: str) -> list[str]:
        text = self.texts.get(path) or self.generators.get(path, "")
        out: list[str] = []
        for name in _INCLUDE.findall(text) if path in self.texts else \
                re.findall(r'#\s*include\s*"([^"]+)"', text):
            out += [f for f in self.resolve(path, name) if f != path]
        return out


def _normal(path: str) -> str:
    parts: list[str] = []
    for part in path.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def _family(path: str) -> str:
    return "cpu" if "cpu" in Path(path).parts[:-1] else "gpu"


def read_native(root: Path, native_root: str = "csrc") -> NativeMap:
    """The map of one source tree (``root``: the engine's top folder, holding
    ``native_root``)."""
    tree = _Tree(root=root, native_root=native_root)
    base = root / native_root
    for file in sorted(base.rglob("*")) if base.is_dir() else []:
        if not file.is_file():
            continue
        rel = file.relative_to(root).as_posix()
        if file.suffix in NATIVE_SUFFIXES:
            tree.texts[rel] = file.read_text(encoding="utf-8", errors="replace")
        elif file.suffix in GENERATOR_SUFFIXES:
            text = file.read_text(encoding="utf-8", errors="replace")
            if "#include" in text:
                tree.generators[rel] = text
    return build_map(tree)


Functions = dict[tuple[str, str], set[str]]  # (family, function) -> the ops it implements


def build_map(tree: _Tree) -> NativeMap:
    registrations: dict[str, tuple[Registration, ...]] = {}
    for path, text in tree.texts.items():
        if "TORCH_LIBRARY" in text:
            calls = read_registrations(path, text)
            if calls:
                registrations[path] = calls
    ops: dict[str, set[str]] = {}
    # a CPU op's function is looked for in the CPU build's files only (vLLM's CUDA and CPU
    # ops share names and their functions' names)
    by_function: Functions = {}
    for path, calls in registrations.items():
        family = _family(path)
        for call in calls:
            ops.setdefault(call.op, set()).add(family)
            for function in call.functions:
                by_function.setdefault((family, function), set()).add(call.op)
    defined = {path: defines(text) for path, text in tree.texts.items()
               if path not in registrations and Path(path).suffix not in HEADER_SUFFIXES}
    closure = _closures(tree)
    file_ops: dict[str, set[Reach]] = {}

    def reach(start: str, reached: set[Reach]) -> None:
        for dep in closure(start):
            file_ops.setdefault(dep, set()).update(reached)

    sources: dict[Reach, set[str]] = {}
    for path, functions in defined.items():
        family = _family(path)
        reached = {Reach(family, op) for f in functions
                   for op in by_function.get((family, f), ())}
        for found in reached:
            sources.setdefault(found, set()).add(path)
        if reached:
            reach(path, reached)
    _link_declared(tree, defined, file_ops, reach)
    declared = _registration_declarations(tree, registrations, by_function, file_ops)
    return NativeMap(ops={op: frozenset(f) for op, f in ops.items()}, registrations=registrations,
                     file_ops={p: frozenset(o) for p, o in file_ops.items()},
                     declarations=declared, native_root=tree.native_root,
                     sources={r: frozenset(p) for r, p in sources.items()})


def _link_declared(tree: _Tree, defined: Mapping[str, set[str]],
                   file_ops: dict[str, set[Reach]],
                   reach: Callable[[str, set[Reach]], None]) -> None:
    """A source that defines what a reached header declares (moe_fp8.cpp defines a kernel
    gemm.h declares and moe.cpp calls) reaches that header's ops, in its own build."""
    for _ in range(3):  # a helper of a helper: a few rounds reach a fixed point here
        headers = {p: set(declarations(t)) for p, t in tree.texts.items()
                   if Path(p).suffix in HEADER_SUFFIXES and p in file_ops}
        grown = False
        for path, functions in defined.items():
            family = _family(path)
            reached = {r for h, names in headers.items() if names & functions
                       for r in file_ops[h] if r.family == family}
            if reached - file_ops.get(path, set()):
                reach(path, reached)
                grown = True
        if not grown:
            break


def _registration_declarations(tree: _Tree, registrations: Mapping[str, Sequence[Registration]],
                               by_function: Functions, file_ops: dict[str, set[Reach]]
                               ) -> dict[str, dict[str, tuple[int, int]]]:
    """Where each registration file declares its ops' functions; a header it includes that
    declares them (vLLM's ``ops.h``) reaches those ops."""
    declared: dict[str, dict[str, tuple[int, int]]] = {}
    for path in registrations:
        family = _family(path)
        names = {f for fam, f in by_function if fam == family}
        declared[path] = declarations(tree.texts[path], names)
        for header in tree.includes(path):
            for function in declarations(tree.texts.get(header, ""), names):
                file_ops.setdefault(header, set()).update(
                    Reach(family, op) for op in by_function[(family, function)])
    return declared


def _closures(tree: _Tree) -> Callable[[str], frozenset[str]]:
    cache: dict[str, frozenset[str]] = {}

    def closure(start: str) -> frozenset[str]:
        if start in cache:
            return cache[start]
        seen = {start}
        todo = [start]
        while todo:
            path = todo.pop()
            nexts = tree.includes(path)
            if Path(path).suffix in HEADER_SUFFIXES:
                nexts += _siblings(tree, path)
            for dep in nexts:
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        cache[start] = frozenset(seen)
        return cache[start]

    return closure


def _siblings(tree: _Tree, header: str) -> list[str]:
    """The implementation beside a header (same folder, same stem, a source suffix)."""
    stem = str(Path(header).with_suffix(""))
    return [f"{stem}{s}" for s in (".cpp", ".cc", ".cu", ".c") if f"{stem}{s}" in tree.texts]
