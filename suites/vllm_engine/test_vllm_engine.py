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
import os
import time
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


def _transformers_greedy(model_dir: Path, dtype: Any, prompts: list[list[int]],
                         timed: dict[str, float] | None = None) -> list[list[int]]:
    """transformers' greedy tokens; with ``timed``, decoded twice and the second (warm)
    decode's seconds kept there."""
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(str(model_dir), dtype=dtype).eval()

    def decode() -> list[list[int]]:
        out = []
        with torch.no_grad():
            for ids in prompts:
                tokens = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS,
                                        min_new_tokens=NEW_TOKENS, do_sample=False)
                out.append(tokens[0, len(ids):].tolist())
        return out

    if timed is None:
        return decode()
    decode()
    start = time.perf_counter()
    tokens = decode()
    timed["seconds"] = time.perf_counter() - start
    return tokens


def _vllm_greedy(model_dir: Path, dtype: str, prompts: list[list[int]],
                 timed: dict[str, float] | None = None) -> list[list[int]]:
    """vLLM's greedy tokens; with ``timed``, decoded twice, the second (warm) decode's
    seconds and torch's thread count once the engine is up kept there."""
    import torch
    from vllm import LLM, SamplingParams

    def decode(engine: Any) -> list[list[int]]:
        results = engine.generate([{"prompt_token_ids": ids} for ids in prompts], params,
                                  use_tqdm=False)
        return [list(r.outputs[0].token_ids) for r in results]

    llm = LLM(model=str(model_dir), dtype=dtype, max_model_len=128, seed=0,
              max_num_seqs=len(prompts))
    try:
        params = SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, ignore_eos=True)
        if timed is None:
            return decode(llm)
        decode(llm)
        start = time.perf_counter()
        tokens = decode(llm)
        timed["seconds"] = time.perf_counter() - start
        timed["threads"] = torch.get_num_threads()
        return tokens
    finally:
        del llm
        gc.collect()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_greedy_tokens_match_transformers(model_dir: Path, dtype: str, vllm_library: Any,
                                          platform: Any, record_property: Any) -> None:
    import torch

    from harness.plugin.speed import budgeted_threads, threads_problem

    prompts = _prompt_ids(model_dir)
    engine: dict[str, float] = {}
    got = _vllm_greedy(model_dir, dtype, prompts, engine)
    record_property("kernel_library", vllm_library())
    baseline: dict[str, float] = {}
    want = _transformers_greedy(model_dir, getattr(torch, dtype), prompts, baseline)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        first = next((n for n, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), None)
        record_property(f"prompt{i}.first_difference", "none" if first is None else first)
    _record_speed(platform, engine, baseline, sum(map(len, got)), record_property)
    assert got == want, (f"vLLM's greedy tokens differ from transformers' ({dtype}): "
                         f"vllm {got}, transformers {want}")
    budget = budgeted_threads(os.environ)
    problem = None if budget is None else threads_problem("vLLM", int(engine["threads"]),
                                                           budget)
    assert problem is None, problem


def _record_speed(platform: Any, engine: dict[str, float], baseline: dict[str, float],
                  tokens: int, record_property: Any) -> None:
    """Decode tokens/s of vLLM and of transformers on the same host, model and prompts; the
    ratio in the speed tier's vocabulary (engine time over baseline time), or why none."""
    from harness.plugin.speed import why_no_speed
    from harness.results.speed import BASELINE, RATIO, SKIPPED

    record_property("engine_threads", int(engine["threads"]))
    why = why_no_speed(platform=platform.name, emulate=platform.emulate, provider="vllm",
                       environ=os.environ)
    if why is not None:
        record_property(SKIPPED, why)
        return
    record_property("decode_tokens_per_s", f"{tokens / engine['seconds']:.4g}")
    record_property("transformers_tokens_per_s", f"{tokens / baseline['seconds']:.4g}")
    record_property(RATIO, f"{engine['seconds'] / baseline['seconds']:.4g}")
    record_property(BASELINE, "transformers")
