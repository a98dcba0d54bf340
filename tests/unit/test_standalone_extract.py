"""The extractor a suite's ``standalone`` hook takes its code with (harness/repro/
standalone_ops.py), on the shapes of source a project may have beyond the shipped suites'
(test_standalone_ops.py holds it against those): a name two modules define, decorators,
comments above a body, signatures over several lines and with every kind of parameter,
imports by alias and by dotted name, a body on its def's line; and ``import_lines`` /
``definitions``, which the vllm_engine suite's hook uses. Each script text is compiled and
run, as the script would run it."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from harness.repro.standalone_ops import (
    ExtractionError,
    Extractor,
    definitions,
    import_lines,
)

# refengine/ is a project package name: these modules are "the project's" to the extractor.
FILES = {
    "refengine/__init__.py": "",
    "refengine/shapes.py": '''
from __future__ import annotations

import math
import os.path as osp

SCALE: float = 2.0
LIMIT: int
WIDTH = 3  # WIDTH of shapes
DOUBLE: int = WIDTH * 2


def helper(x: float) -> float:
    return x * SCALE


class Box:
    """A value in a box."""

    size: int = WIDTH
    label: str

    def __init__(self, v):
        self.v = v


def rooted(x):
    import os.path
    return math.sqrt(x) + len(osp.join("a", "b")) * 0 + len(os.path.sep) * 0 + DOUBLE - 6
''',
    "refengine/ops.py": '''
from __future__ import annotations

import functools
import refengine.shapes as shapes_module
from refengine.shapes import Box as ShapeBox
from refengine.shapes import helper as shape_helper
from refengine.shapes import rooted

SCALE = 10.0  # SCALE here is ops' own
WIDTH = 5


def helper(x):
    return x + SCALE


class Box:
    """Not shapes' class Box."""


class Result:
    """Named only in an annotation: never taken."""


@functools.lru_cache(
    maxsize=None,
)
def combined(
    a: float,
    /,
    b: float = WIDTH,
    *rest: float,
    scale: float = SCALE,
    **extra: float,
) -> tuple[
    Result, float
]:
    # first comment, kept
    # second comment, kept
    import json as js
    local = helper(a) + shape_helper(b) + rooted(4.0) + len(js.dumps(rest))
    return local * scale, ShapeBox(b).v + Box.__name__.count("B") + WIDTH


def by_module(x):
    return shapes_module.helper(x)


def one_line(x): return x


def closing_line(
    x,
): return x


def closing_paren(
    x,
):
    return x
''',
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text.lstrip("\n"), encoding="utf-8")
    return tmp_path


def _script(extractor: Extractor) -> str:
    return ("\n".join(extractor.imports) + "\n\n"
            + "\n\n".join(p.text for p in extractor.pieces()))


def test_a_name_two_modules_define_is_prefixed_where_it_is_not_the_first(root: Path) -> None:
    extractor = Extractor(root=root)
    assert extractor.take("refengine/ops.py", "combined") == "combined"
    names = {(p.path, p.name): p.script_name for p in extractor.pieces()}
    assert names == {
        ("refengine/ops.py", "SCALE"): "SCALE", ("refengine/ops.py", "helper"): "helper",
        ("refengine/shapes.py", "SCALE"): "shapes_SCALE",
        ("refengine/shapes.py", "helper"): "shapes_helper",
        ("refengine/shapes.py", "rooted"): "rooted",
        ("refengine/shapes.py", "WIDTH"): "shapes_WIDTH",
        ("refengine/shapes.py", "DOUBLE"): "DOUBLE",
        ("refengine/shapes.py", "Box"): "Box",
        ("refengine/ops.py", "Box"): "ops_Box",
        ("refengine/ops.py", "WIDTH"): "WIDTH",
        ("refengine/ops.py", "combined"): "combined"}
    text = _script(extractor)
    pieces = {p.script_name: p.text for p in extractor.pieces()}
    # each use renamed in place, on its own line, the rest of the line as written
    assert "    return x * shapes_SCALE\n" in pieces["shapes_helper"]
    assert pieces["shapes_SCALE"] == "shapes_SCALE = 2.0\n"  # no annotation at module level
    assert pieces["DOUBLE"] == "DOUBLE = shapes_WIDTH * 2\n"
    assert pieces["SCALE"] == "SCALE = 10.0  # SCALE here is ops' own\n"
    assert pieces["shapes_WIDTH"] == "shapes_WIDTH = 3  # WIDTH of shapes\n"
    assert "    size: int = shapes_WIDTH\n" in pieces["Box"]
    assert pieces["ops_Box"] == 'class ops_Box:\n    """Not shapes\' class Box."""\n'
    assert pieces["Box"].startswith('class Box:\n    """A value in a box."""\n')
    assert ("    local = helper(a) + shapes_helper(b) + rooted(4.0) + len(js.dumps(rest))\n"
            in pieces["combined"])
    assert ("    return local * scale, Box(b).v + ops_Box.__name__.count(\"B\") + WIDTH\n"
            in pieces["combined"])
    # the first taken keeps its name: the default's WIDTH (ops'), read before Box's (shapes')
    # the order: each piece after what it uses
    order = [p.script_name for p in extractor.pieces()]
    assert order.index("shapes_SCALE") < order.index("shapes_helper") < order.index("combined")
    namespace: dict[str, object] = {}
    exec(compile(text, "script.py", "exec"), namespace)
    combined = namespace["combined"]
    assert callable(combined)
    # helper(1) = 11, shapes.helper(5) = 10, rooted(4) = 2; Box(5).v = 5, 1 "B", WIDTH 5
    assert combined(1.0) == ((11.0 + 10.0 + 2.0 + 2) * 10.0, 5 + 1 + 5)


def test_a_functions_signature_loses_its_annotations_its_decorators_and_comments_stay(
        root: Path) -> None:
    extractor = Extractor(root=root)
    extractor.take("refengine/ops.py", "combined")
    text = next(p.text for p in extractor.pieces() if p.name == "combined")
    assert text.startswith("@functools.lru_cache(\n    maxsize=None,\n)\n"
                           "def combined(a, /, b=WIDTH, *rest, scale=SCALE, **extra):\n"
                           "    # first comment, kept\n    # second comment, kept\n"
                           "    import json as js\n")
    assert "float" not in text and "tuple" not in text
    assert extractor.imports == ["import functools", "import math", "import os.path as osp"]
    ast.parse(text)


def test_a_piece_taken_once_keeps_its_name_and_the_reserved_names_are_avoided(
        root: Path) -> None:
    extractor = Extractor(root=root, reserved=frozenset({"helper"}))
    assert extractor.take("refengine/shapes.py", "helper") == "shapes_helper"
    assert extractor.take("refengine/shapes.py", "helper") == "shapes_helper"
    assert extractor.take("refengine/ops.py", "helper") == "ops_helper"
    # shapes' SCALE came first (with shapes' helper): ops' own is prefixed, and its use
    assert "def ops_helper(x):\n    return x + ops_SCALE\n" in _script(extractor)
    assert [p.script_name for p in extractor.pieces()].count("shapes_helper") == 1
    clash = Extractor(root=root, reserved=frozenset({"helper", "shapes_helper"}))
    with pytest.raises(ExtractionError, match="helper and shapes_helper both taken"):
        clash.take("refengine/shapes.py", "helper")


@pytest.mark.parametrize(("name", "says"), [
    ("by_module", "refengine/ops.py uses the module shapes_module (refengine/shapes.py) by "
     "attribute: name what it uses instead"),
    ("one_line", "one_line: a body on the line of its def"),
    ("closing_line", "closing_line: a body on the line of its def"),
    ("nothing", "refengine/ops.py: cannot tell where 'nothing' comes from"),
    ("functools", "refengine/ops.py defines no 'functools'"),
])
def test_code_the_script_cannot_hold_is_one_line(root: Path, name: str, says: str) -> None:
    extractor = Extractor(root=root)
    with pytest.raises(ExtractionError) as caught:
        extractor.take("refengine/ops.py", name)
        extractor.pieces()  # a piece's text is read when the script is put together
    assert str(caught.value) == f"--standalone: cannot take the suite's code: {says}"


def test_a_signature_closed_on_a_line_of_its_own_is_not_taken_into_the_body(
        root: Path) -> None:
    extractor = Extractor(root=root)
    extractor.take("refengine/ops.py", "closing_paren")
    assert [p.text for p in extractor.pieces()] == ["def closing_paren(x):\n    return x\n"]


def test_an_import_outside_the_allowed_packages_and_an_unknown_name_are_refused(
        root: Path) -> None:
    (root / "refengine" / "bad.py").write_text(
        "import yaml\nimport numpy.linalg\n\n\ndef f(x):\n    return yaml.dump(x)\n\n\n"
        "def g(x):\n    return numpy.linalg.norm(x) + undefined_thing\n\n\n"
        "def h(x):\n    return numpy.linalg.norm(x)\n")
    with pytest.raises(ExtractionError, match=r"refengine/bad.py: import yaml: a script has "
                                              r"only the standard library, torch and numpy"):
        Extractor(root=root).take("refengine/bad.py", "f")
    with pytest.raises(ExtractionError, match=r"refengine/bad.py: cannot tell where "
                                              r"'undefined_thing' comes from"):
        Extractor(root=root).take("refengine/bad.py", "g")
    extractor = Extractor(root=root)
    extractor.take("refengine/bad.py", "h")
    assert extractor.imports == ["import numpy.linalg"]
    (root / "refengine" / "gone.py").write_text("from refengine.missing import x\n")
    with pytest.raises(ExtractionError, match=r"cannot find the module refengine.missing"):
        Extractor(root=root).take("refengine/gone.py", "x")


def test_a_projects_module_imported_without_a_name_binds_nothing(root: Path) -> None:
    (root / "refengine" / "plain.py").write_text(
        "import refengine.shapes\nimport refengine\n\n\ndef f(x):\n"
        "    return refengine.shapes.helper(x)\n")
    with pytest.raises(ExtractionError, match="cannot tell where 'refengine' comes from"):
        Extractor(root=root).take("refengine/plain.py", "f")


# -- a module's imports and definitions as written (the vllm_engine hook's) ------------------

SOURCE = textwrap.dedent('''
    from __future__ import annotations

    import os.path
    import pytest
    import os.path as osp, pytest as pt, sys
    from . import sibling
    from vllm import LLM
    from vllm.config import VllmConfig
    from json import dumps as d, loads

    A = B = 1
    C: int = 2


    def first(x):
        return x


    class K:
        pass


    def second():
        return A
''')


def test_import_lines_keep_each_statement_as_written_but_the_skipped_packages() -> None:
    tree = ast.parse(SOURCE)
    assert import_lines(tree, SOURCE, ("__future__", "pytest", "vllm")) == [
        "import os.path", "import os.path as osp", "import sys", "from . import sibling",
        "from json import dumps as d, loads"]
    assert import_lines(tree, SOURCE, ("os", "json", "__future__")) == [
        "import pytest", "import pytest as pt", "import sys", "from . import sibling",
        "from vllm import LLM", "from vllm.config import VllmConfig"]


def test_definitions_are_the_top_level_assignments_and_functions_wanted() -> None:
    tree = ast.parse(SOURCE)
    everything = definitions(tree, SOURCE, None)
    assert everything == ["A = B = 1", "def first(x):\n    return x",
                          "def second():\n    return A"]
    assert definitions(tree, SOURCE, ("B", "second")) == ["A = B = 1",
                                                          "def second():\n    return A"]
    assert definitions(tree, SOURCE, ("K", "C")) == []
    assert definitions(tree, SOURCE, ()) == []
