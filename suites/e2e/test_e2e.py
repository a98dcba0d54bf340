"""Tiny decoders generate 32 greedy tokens from fixed prompts, tokenised through the real
tiktoken encoding from the primed cache, per provider set: ids equal the platform's golden
ids, logits within tolerance of the fp32 native reference."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from refengine import registry
from refengine.model.decoder import DecoderConfig, TinyDecoder, generate, teacher_forced_logits
from refengine.ops.spec import OP_NAMES
from refengine.providers import get_provider
from refengine.tokenizer import get_encoding

PROMPTS = (
    "The engine reads the cache and picks the next token.",
    "Quantisation makes the weights smaller.",
)
NEW_TOKENS = 32
MODELS = {"llama": 0, "moe": 4}  # name -> experts
PROVIDER_SETS = ("native", "platform", "torch", "inductor", "triton", "zentorch")


def _registry(platform: Any, provider_set: str) -> registry.Registry:
    if provider_set == "platform":
        return registry.Registry.from_matrix(platform.matrix, device=platform.device)
    return registry.Registry({op: (provider_set,) for op in OP_NAMES}, device=platform.device)


@pytest.fixture(scope="module")
def encoding() -> Any:
    return get_encoding()


@pytest.mark.parametrize("model_name", list(MODELS))
@pytest.mark.parametrize("provider_set", PROVIDER_SETS)
def test_generate(
    platform: Any,
    tolerance: Any,
    record_numerics: Any,
    record_property: Any,
    golden: Any,
    encoding: Any,
    model_name: str,
    provider_set: str,
) -> None:
    if provider_set != "platform":
        ok, why = get_provider(provider_set, platform.device).is_available()
        if not ok:
            pytest.skip(f"provider {provider_set} unavailable: {why}")
    dtype = torch.bfloat16 if "bfloat16" in platform.dtypes else torch.float32
    cfg = DecoderConfig(vocab=encoding.n_vocab, experts=MODELS[model_name])
    model = TinyDecoder(cfg, dtype)
    reference = TinyDecoder(cfg, torch.float32)
    record_property("provider", provider_set)
    for p, text in enumerate(PROMPTS):
        prompt = encoding.encode(text)
        with registry.using(_registry(platform, provider_set)):
            ids, logits = generate(model, prompt, NEW_TOKENS)
        with registry.using(registry.Registry({})):
            ref = teacher_forced_logits(reference, prompt, ids)
        record_property(f"text.{p}", encoding.decode(ids))
        golden.check(f"{model_name}/prompt{p}", ids, record=provider_set == "native")
        record_numerics(
            logits,
            ref,
            tolerance(dtype, "e2e_logits"),
            op=f"e2e.{model_name}.prompt{p}",
            dtype=str(dtype)[6:],
            platform=platform.name,
        )
