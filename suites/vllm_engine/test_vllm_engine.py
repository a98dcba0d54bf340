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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tiny_llama import make_tiny_llama

from harness.plugin.speed import budgeted_threads, threads_problem, why_no_speed
from harness.results.speed import BASELINE, RATIO, SKIPPED

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


@dataclass
class Decoded:
    tokens: list[list[int]]
    seconds: float  # the decode of every prompt, warm (a first decode before it untimed)
    threads: int = 0  # torch's thread count once the engine is up

    @property
    def tokens_per_s(self) -> float:
        return sum(map(len, self.tokens)) / self.seconds if self.seconds > 0 else 0.0


def _transformers_greedy(model_dir: Path, dtype: Any, prompts: list[list[int]]) -> Decoded:
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

    decode()
    start = time.perf_counter()
    tokens = decode()
    return Decoded(tokens, time.perf_counter() - start)


def _generate(llm: Any, prompts: list[list[int]], params: Any) -> list[list[int]]:
    results = llm.generate([{"prompt_token_ids": ids} for ids in prompts], params,
                           use_tqdm=False)
    return [list(r.outputs[0].token_ids) for r in results]


def _vllm_greedy(model_dir: Path, dtype: str, prompts: list[list[int]]) -> Decoded:
    import torch
    from vllm import LLM, SamplingParams

    llm = LLM(model=str(model_dir), dtype=dtype, max_model_len=128, seed=0,
              max_num_seqs=len(prompts))
    try:
        params = SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, ignore_eos=True)

        _generate(llm, prompts, params)
        start = time.perf_counter()
        tokens = _generate(llm, prompts, params)
        return Decoded(tokens, time.perf_counter() - start, torch.get_num_threads())
    finally:
        del llm
        gc.collect()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_greedy_tokens_match_transformers(model_dir: Path, dtype: str, vllm_library: Any,
                                          record_property: Any) -> None:
    import torch

    prompts = _prompt_ids(model_dir)
    engine = _vllm_greedy(model_dir, dtype, prompts)
    record_property("kernel_library", vllm_library())
    baseline = _transformers_greedy(model_dir, getattr(torch, dtype), prompts)
    got, want = engine.tokens, baseline.tokens
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        first = next((n for n, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), None)
        record_property(f"prompt{i}.first_difference", "none" if first is None else first)
    _record_speed(engine, baseline, record_property)
    assert got == want, (f"vLLM's greedy tokens differ from transformers' ({dtype}): "
                         f"vllm {got}, transformers {want}")
    budget = budgeted_threads(os.environ)
    problem = None if budget is None else threads_problem("vLLM", engine.threads, budget)
    assert problem is None, problem


def _record_speed(engine: Decoded, baseline: Decoded, record_property: Any) -> None:
    """Decode tokens/s of vLLM and of transformers on the same host, model and prompts; the
    ratio in the speed tier's vocabulary (engine time over baseline time), or why none."""
    record_property("engine_threads", engine.threads)
    why = why_no_speed(platform="vllm", emulate=False, provider="vllm", environ=os.environ)
    if why is not None:
        record_property(SKIPPED, why)
        return
    record_property("decode_tokens_per_s", f"{engine.tokens_per_s:.4g}")
    record_property("transformers_tokens_per_s", f"{baseline.tokens_per_s:.4g}")
    record_property(RATIO, f"{engine.seconds / baseline.seconds:.4g}")
    record_property(BASELINE, "transformers")
