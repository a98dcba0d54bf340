"""Guards against small leftovers coming back: a line that says one thing twice, a table
nothing reads, two tables with one content, an exit-code literal beside ``Exit``, and a
module docstring that describes a narrower module than the one there is."""

from __future__ import annotations

import ast
import platform
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import InfraError
from harness.history import infra
from harness.matrix import load_matrix
from harness.platform import cpu_emulation, doctor
from harness.results import run_folder

HARNESS = Path(__file__).resolve().parents[2] / "harness"


# -- a missing qemu names its install command once ---------------------------------------


@pytest.fixture
def no_qemu(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(shutil, "which", lambda _name, *a, **k: None)
    cpu_emulation._facts.cache_clear()
    yield
    cpu_emulation._facts.cache_clear()


def test_a_missing_qemu_says_its_install_command_once(no_qemu: None) -> None:
    with pytest.raises(InfraError) as raised:
        cpu_emulation.qemu()
    assert str(raised.value).count(cpu_emulation.INSTALL) == 1, str(raised.value)


def test_the_doctors_line_for_a_missing_qemu_says_its_install_command_once(
        no_qemu: None) -> None:
    check = doctor.check_cpu_emulation(load_matrix("vllm-cpu-v3"))
    line = check.line()
    assert not check.ok and "qemu-user is not installed" in line, line
    assert line.count(cpu_emulation.INSTALL) == 1, line


# -- history/infra.py: every table read, no two alike ------------------------------------


def _module_level_names(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def test_every_table_of_history_infra_is_read() -> None:
    source = Path(infra.__file__)
    tree = ast.parse(source.read_text())
    read_here = {n.id for n in ast.walk(tree)
                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    elsewhere = [p.read_text() for root in (HARNESS, HARNESS.parent / "tests")
                 for p in root.rglob("*.py") if p.resolve() != source.resolve()]
    elsewhere = [t for t in elsewhere if re.search(r"history(\.| import )infra\b", t)]
    unread = [name for name in _module_level_names(tree) if name not in read_here
              and not any(re.search(rf"\b{name}\b", t) for t in elsewhere)]
    assert unread == []


def test_history_infra_has_no_two_equal_tables() -> None:
    tables = {name: value for name, value in vars(infra).items()
              if not name.startswith("__") and isinstance(value, dict)}
    names = sorted(tables)
    alike = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]
             if tables[a] == tables[b]]
    assert alike == []


# -- harness's own exit status is an Exit member, never a bare literal --------------------

EXIT_MODULES = sorted([HARNESS / "cli.py", HARNESS / "process" / "cancel.py",
                       *(HARNESS / "commands").glob("*.py"), *(HARNESS / "run").glob("*.py")])
_EXITS = {"exit", "_exit", "SystemExit"}
_CODES = {"code", "exit_code"}


def _ints(node: ast.AST | None) -> Iterator[ast.Constant]:
    """The int literals an expression evaluates to (through ``a if c else b``, ``a or b``)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        yield node
    elif isinstance(node, ast.IfExp):
        yield from _ints(node.body)
        yield from _ints(node.orelse)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            yield from _ints(value)


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def exit_literals(source: str) -> list[str]:
    """``line: literal`` for each int literal that stands for an exit status: a returned
    one other than 0, any given to sys.exit / os._exit / SystemExit, to an ``exit_code=``
    keyword or as ``getattr(..., "exit_code", default)``'s default, or compared with a local
    ``code`` / ``exit_code`` (a subprocess's ``done.returncode != 0`` is no exit status of
    the harness's own)."""
    found: list[ast.Constant] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Return):
            found += [c for c in _ints(node.value) if c.value != 0]
        elif isinstance(node, ast.Call):
            if _callee(node) in _EXITS:
                found += [c for arg in node.args for c in _ints(arg)]
            if (_callee(node) == "getattr" and len(node.args) == 3
                    and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value == "exit_code"):
                found += list(_ints(node.args[2]))
            found += [c for kw in node.keywords if kw.arg == "exit_code"
                      for c in _ints(kw.value)]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = [s for s in sides if isinstance(s, ast.Name) and s.id in _CODES]
            if named:
                found += [c for s in sides for c in _ints(s)]
    return [f"{c.lineno}: {c.value}" for c in found]


@pytest.mark.parametrize("snippet", [
    "def f():\n    return 2\n",
    "def f(bad):\n    return 1 if bad else 0\n",
    "import sys\nsys.exit(3)\n",
    "raise SystemExit(130)\n",
    "m.finish(status='skipped', exit_code=0)\n",
    "code = int(getattr(stop, 'exit_code', 130))\n",
    "x = 'a' if code == 130 else 'b'\n",
])
def test_an_exit_code_literal_is_found(snippet: str) -> None:
    assert exit_literals(snippet)


def test_what_is_no_exit_code_literal_is_left_alone() -> None:
    assert exit_literals("def f(bad):\n    return 0\n"
                         "def g(s):\n    return 128 + s if s else 0\n"
                         "def h():\n    return Exit.FAILED if bad else Exit.OK\n"
                         "def k():\n    return 0.0, 0.5\n"
                         "if done.returncode != 0 or result.exit_code == 1:\n    pass\n") == []


def test_the_harness_exit_status_is_an_exit_member() -> None:
    found = [f"{path.relative_to(HARNESS.parent)}:{line}" for path in EXIT_MODULES
             for line in exit_literals(path.read_text())]
    assert found == []


# -- results/run_folder.py says what it is -----------------------------------------------


def test_run_folder_says_it_is_the_one_reader_for_compare_bisect_and_repro() -> None:
    doc = run_folder.__doc__ or ""
    assert doc.startswith("The one reader of a run folder"), doc
    readers = {path.relative_to(HARNESS).parts[0] for path in HARNESS.rglob("*.py")
               if "harness.results.run_folder" in path.read_text()
               and path.parent.name != "results"}
    assert readers == {"reports", "bisect", "repro"}
    for user in ("compare", "bisect", "repro"):
        assert user in doc, user
