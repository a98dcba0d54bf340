"""A library for a suite's ``standalone`` hook (docs/byo-suite.md): taking a suite's own
code into a standalone script by ``ast``, from the files it runs (so the script cannot
drift from them), with no copy of it kept anywhere.

``Extractor`` takes a top-level definition of a file under the project root with
everything it uses from the project (the private helpers and constants of its module, the
names it imports from the project's packages), found by walking its ``ast``; the standard
library's and torch's imports it needs come along as import lines. Function signatures
lose their annotations (the script stays plain torch); bodies and comments are kept as
written. A name two sources define differently is prefixed with its module's name where
it is not the first one taken, so the first one's text is as written. ``import_lines``
and ``definitions`` take a module's imports and top-level definitions as written.
``OpCode`` / ``Contract`` are what a kernel-call script's template
(standalone_render.py) is given. Which files, which names, which ops: the hook's.

Pure text (no torch here).
"""

from __future__ import annotations

import ast
import builtins
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import InfraError

ROOT = Path(__file__).resolve().parents[2]
# the packages a script may import besides the standard library
ALLOWED = frozenset({"torch", "numpy"})
PROJECT = ("refengine", "harness")


class ExtractionError(InfraError):
    """The suite's source is not in a shape the script can take code from (exit 3)."""

    def __init__(self, why: str) -> None:
        super().__init__(f"--standalone: cannot take the suite's code: {why}")


Symbol = tuple[str, str]  # (path relative to the root, top-level name)


@dataclass
class _Module:
    path: str
    source: str
    lines: list[bytes]
    defs: dict[str, ast.stmt]
    # name bound by an import -> ("project", module path, name) | ("module", path, "")
    # | ("external", import line, "")
    imports: dict[str, tuple[str, str, str]]


def module_path(root: Path, dotted: str) -> str | None:
    rel = dotted.replace(".", "/")
    for candidate in (f"{rel}.py", f"{rel}/__init__.py"):
        if (root / candidate).is_file():
            return candidate
    return None


def _import_line(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
    as_ = f" as {alias.asname}" if alias.asname else ""
    if isinstance(node, ast.Import):
        return f"import {alias.name}{as_}"
    return f"from {'.' * node.level}{node.module or ''} import {alias.name}{as_}"


def parse_module(root: Path, path: str) -> _Module:
    source = (root / path).read_text(encoding="utf-8")
    tree = ast.parse(source)
    defs: dict[str, ast.stmt] = {}
    imports: dict[str, tuple[str, str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            defs[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    defs[target.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defs[node.target.id] = node
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                imports.update(_bound(root, node, alias))
    return _Module(path, source, [line.encode() for line in source.splitlines(keepends=True)],
                   defs, imports)


def _bound(root: Path, node: ast.Import | ast.ImportFrom,
           alias: ast.alias) -> dict[str, tuple[str, str, str]]:
    """What one imported name is: a project symbol, a project module, or an import line."""
    if isinstance(node, ast.ImportFrom) and node.module == "__future__":
        return {}
    if isinstance(node, ast.Import):
        bound = alias.asname or alias.name.split(".")[0]
        top = alias.name.split(".")[0]
        if top in PROJECT:
            found = module_path(root, alias.name)
            return {bound: ("module", found, "")} if found and alias.asname else {}
        return {bound: ("external", _import_line(node, alias), "")}
    bound = alias.asname or alias.name
    module = node.module or ""
    if module.split(".")[0] in PROJECT:
        submodule = module_path(root, f"{module}.{alias.name}")
        if submodule is not None:
            return {bound: ("module", submodule, "")}
        found = module_path(root, module)
        if found is None:
            raise ExtractionError(f"cannot find the module {module}")
        return {bound: ("project", found, alias.name)}
    return {bound: ("external", _import_line(node, alias), "")}


def _strip(args: ast.arguments) -> ast.arguments:
    """A copy of ``args`` without annotations."""
    copy = ast.parse(f"def f({ast.unparse(args)}): pass").body[0]
    assert isinstance(copy, ast.FunctionDef)
    for arg in (*copy.args.posonlyargs, *copy.args.args, *copy.args.kwonlyargs,
                *([copy.args.vararg] if copy.args.vararg else []),
                *([copy.args.kwarg] if copy.args.kwarg else [])):
        arg.annotation = None
    return copy.args


def _local_names(node: ast.FunctionDef) -> set[str]:
    args = node.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store | ast.Del):
            names.add(sub.id)
        elif isinstance(sub, ast.Import | ast.ImportFrom):
            names |= {a.asname or a.name.split(".")[0] for a in sub.names}
        elif isinstance(sub, ast.arg):
            names.add(sub.arg)
        elif (isinstance(sub, ast.ExceptHandler) and sub.name) or (
                isinstance(sub, ast.FunctionDef | ast.ClassDef) and sub is not node):
            names.add(sub.name or "")
    return names


def _used(node: ast.stmt) -> list[ast.Name]:
    """The free names a definition reads, in source order: a function's decorators,
    defaults and body (its signature's annotations are stripped, never read); a class's
    methods each as a function of their own."""
    methods: list[ast.stmt] = []
    local: set[str] = set()
    if isinstance(node, ast.FunctionDef):
        local = _local_names(node)
        parts: list[ast.AST] = [*node.decorator_list, *node.args.defaults,
                                *[d for d in node.args.kw_defaults if d is not None],
                                *node.body]
    elif isinstance(node, ast.ClassDef):
        methods = [s for s in node.body if isinstance(s, ast.FunctionDef)]
        parts = [*node.decorator_list, *node.bases,
                 *[s for s in node.body if not isinstance(s, ast.AnnAssign | ast.FunctionDef)],
                 *[s.value for s in node.body if isinstance(s, ast.AnnAssign) and s.value]]
    elif isinstance(node, ast.AnnAssign):
        parts = [node.value] if node.value else []
    else:
        parts = [node]
    found = [name for method in methods for name in _used(method)]
    found += [sub for part in parts for sub in ast.walk(part)
              if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load)
              and sub.id not in local]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


@dataclass(frozen=True)
class Piece:
    """One definition the script holds: where it comes from and its text there."""

    path: str
    name: str
    script_name: str
    text: str


@dataclass
class Extractor:
    """Takes definitions with what they use; one per script (names are given once)."""

    root: Path = ROOT
    reserved: frozenset[str] = frozenset()  # the script's own names
    modules: dict[str, _Module] = field(default_factory=dict)
    names: dict[Symbol, str] = field(default_factory=dict)
    order: list[Symbol] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)

    def module(self, path: str) -> _Module:
        if path not in self.modules:
            self.modules[path] = parse_module(self.root, path)
        return self.modules[path]

    def resolve(self, path: str, name: str) -> Symbol | None:
        """Where ``name``, as ``path`` reads it, is defined (None: an import or a builtin)."""
        module = self.module(path)
        if name in module.defs:
            return (path, name)
        kind, where, what = module.imports.get(name, ("", "", ""))
        if kind == "project":
            return self.resolve(where, what)
        if kind == "module":
            raise ExtractionError(f"{path} uses the module {name} ({where}) by attribute: "
                                  "name what it uses instead")
        if kind == "external":
            top = where.split()[1].split(".")[0]
            if top not in ALLOWED and top not in sys.stdlib_module_names:
                raise ExtractionError(f"{path}: {where}: a script has only the standard "
                                      "library, torch and numpy")
            if where not in self.imports:
                self.imports.append(where)
            return None
        if hasattr(builtins, name):
            return None
        raise ExtractionError(f"{path}: cannot tell where {name!r} comes from")

    def take(self, path: str, name: str) -> str:
        """Take ``name`` of ``path`` and what it uses; its name in the script."""
        symbol = self.resolve(path, name)
        if symbol is None:
            raise ExtractionError(f"{path} defines no {name!r}")
        self._take(symbol)
        return self.names[symbol]

    def _take(self, symbol: Symbol) -> None:
        if symbol in self.names:
            return
        path, name = symbol
        taken = set(self.names.values()) | self.reserved
        stem = Path(path).stem
        self.names[symbol] = name if name not in taken else f"{stem}_{name}"
        if self.names[symbol] in taken:
            raise ExtractionError(f"{path}: {name} and {self.names[symbol]} both taken")
        for used in _used(self.module(path).defs[name]):
            found = self.resolve(path, used.id)
            if found is not None:
                self._take(found)
        self.order.append(symbol)

    def pieces(self) -> list[Piece]:
        """Every definition taken, each after what it uses, as text for the script."""
        return [Piece(path, name, self.names[(path, name)], self._text(path, name))
                for path, name in self.order]

    def _text(self, path: str, name: str) -> str:
        module = self.module(path)
        node = module.defs[name]
        lines = list(module.lines)
        # renames, right to left: each use of a taken name whose script name differs
        edits: list[tuple[int, int, int, str]] = []
        for used in _used(node):
            found = self.resolve(path, used.id)
            if found is not None and self.names[found] != used.id:
                edits.append((used.lineno, used.col_offset, used.end_col_offset or 0,
                              self.names[found]))
        for line, start, end, new in sorted(edits, reverse=True):
            raw = lines[line - 1]
            lines[line - 1] = raw[:start] + new.encode() + raw[end:]
        script_name = self.names[(path, name)]
        if isinstance(node, ast.FunctionDef):
            return self._function(node, lines, script_name)
        first = min([node.lineno, *[d.lineno for d in getattr(node, "decorator_list", [])]])
        text = b"".join(lines[first - 1:node.end_lineno]).decode()
        if isinstance(node, ast.AnnAssign):  # evaluated at module level: no annotation
            edited = ast.parse(text).body[0]  # its value with the renames in it
            assert isinstance(edited, ast.AnnAssign)
            value = ast.get_source_segment(text, edited.value) if edited.value else "None"
            return f"{script_name} = {value}\n"
        if isinstance(node, ast.ClassDef) and script_name != name:
            text = text.replace(f"class {name}", f"class {script_name}", 1)
        elif isinstance(node, ast.Assign) and script_name != name:
            text = text.replace(name, script_name, 1)
        return text

    @staticmethod
    def _function(node: ast.FunctionDef, lines: list[bytes], script_name: str) -> str:
        decorators = b"".join(b"".join(lines[d.lineno - 1:d.end_lineno])
                              for d in node.decorator_list).decode()
        head = f"def {script_name}({ast.unparse(_strip(node.args))}):\n"
        first = node.body[0]
        start = first.lineno
        if lines[start - 1][:first.col_offset].strip():  # the signature's last line's code
            raise ExtractionError(f"{node.name}: a body on the line of its def")
        # the comments right above the body (the line above them ends the signature: code)
        while lines[start - 2].strip().startswith(b"#"):
            start -= 1
        return decorators + head + b"".join(lines[start - 1:node.end_lineno]).decode()


@dataclass(frozen=True)
class Contract:
    """What refengine/ops/spec.py's ``OpSpec`` says of an op: its parameters, the ones it
    writes, whether NaN / Inf are allowed."""

    params: tuple[str, ...]
    mutates: tuple[str, ...]
    nonfinite: bool


@dataclass(frozen=True)
class OpCode:
    """The code of one op's script: its pieces, imports, the script names of the
    reference, the engine call, the comparison and the library loader, and the files each
    was taken from (as the script's docstring names them)."""

    pieces: list[Piece]
    imports: list[str]
    reference: str
    engine: str
    compare: str
    load: str
    contract: Contract
    engine_from: Symbol
    reference_from: str
    load_from: str
    compare_from: str
    contract_from: str


def import_lines(tree: ast.Module, source: str, skipped: tuple[str, ...]) -> list[str]:
    """A module's top-level import statements as written, but those of the ``skipped``
    top-level packages (the test runner, the suite's own modules); ``import a, b`` as a line
    per module (one of them may be skipped)."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] not in skipped:
                out.append(ast.get_source_segment(source, node) or "")
        elif isinstance(node, ast.Import):
            out += [_import_line(node, alias) for alias in node.names
                    if alias.name.split(".")[0] not in skipped]
    return out


def definitions(tree: ast.Module, source: str, wanted: tuple[str, ...] | None) -> list[str]:
    """Top-level assignments and functions (all, or the ``wanted`` names), in file order,
    as written."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        else:
            continue
        if wanted is None or set(names) & set(wanted):
            out.append(ast.get_source_segment(source, node, padded=True) or "")
    return out
