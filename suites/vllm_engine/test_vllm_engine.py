"""vLLM's own engine, as a user runs it offline: ``vllm.LLM`` in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0 and the KV-cache budget, VLLM_CPU_KVCACHE_SPACE, come
from the matrix's runtime.env), greedy decoding of a tiny Llama made here, against
transformers' LlamaForCausalLM on the same weights, in float32 and bfloat16.

The engine calls vLLM's own CPU kernels on x86 (onednn_mm for fp32 linears, rotary
embedding, the paged-attention cache and kernel, greedy_argmax); kernel_parity checks
the ops one by one, this checks them wired together by vLLM.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from tiny_llama import make_tiny_llama

pytestmark = pytest.mark.requires("vllm")

NEW_TOKENS = 24
PROMPTS = (
    "An inference engine turns a trained model into answers.",
    "The engine splits the prompt into tokens",
    "Each request starts with a prompt.",
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import refengine

    corpus = (Path(refengine.__file__).parent / "data" / "corpus.txt").read_text("utf-8")
    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama"), corpus)


def _prompt_ids(model_dir: Path) -> list[list[int]]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    return [tok.encode(text).ids for text in PROMPTS]


def _transformers_greedy(model_dir: Path, dtype: Any, prompts: list[list[int]]) -> list[list[int]]:
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(str(model_dir), dtype=dtype).eval()
    out = []
    with torch.no_grad():
        for ids in prompts:
            tokens = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS,
                                    min_new_tokens=NEW_TOKENS, do_sample=False)
            out.append(tokens[0, len(ids):].tolist())
    return out


def _vllm_greedy(model_dir: Path, dtype: str, prompts: list[list[int]]) -> list[list[int]]:
    from vllm import LLM, SamplingParams

    llm = LLM(model=str(model_dir), dtype=dtype, max_model_len=128, seed=0,
              max_num_seqs=len(prompts))
    try:
        params = SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, ignore_eos=True)
        results = llm.generate([{"prompt_token_ids": ids} for ids in prompts], params,
                               use_tqdm=False)
        return [list(r.outputs[0].token_ids) for r in results]
    finally:
        del llm
        gc.collect()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_greedy_tokens_match_transformers(model_dir: Path, dtype: str, vllm_library: Any,
                                          record_property: Any) -> None:
    import torch

    prompts = _prompt_ids(model_dir)
    got = _vllm_greedy(model_dir, dtype, prompts)
    record_property("kernel_library", vllm_library())
    want = _transformers_greedy(model_dir, getattr(torch, dtype), prompts)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        first = next((n for n, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), None)
        record_property(f"prompt{i}.first_difference", "none" if first is None else first)
    assert got == want, (f"vLLM's greedy tokens differ from transformers' ({dtype}): "
                         f"vllm {got}, transformers {want}")
