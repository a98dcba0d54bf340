"""Tiny decoders generate greedy tokens from fixed prompts, tokenised through the real
tiktoken encoding from the primed cache, per provider set: ids equal the platform's golden
ids, logits within the ``e2e_logits`` tolerance of the same model computed in fp32, and (MoE)
every token routed to the same experts as in fp32, by a margin no rounding can undo."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from harness.matrix.lane_data import LaneDataMissing
from refengine import registry
from refengine.model.decoder import (
    DecoderConfig,
    TinyDecoder,
    generate,
    new_routing,
    router_logits,
    teacher_forced_logits,
)
from refengine.ops.spec import OP_NAMES
from refengine.providers import get_provider
from refengine.tokenizer import get_encoding

# Same token count (11), so a static-shape provider (inductor) compiles each op once
# for both prompts and both models.
PROMPTS = (
    "The engine reads the cache and picks the next token.",
    "Quantisation makes the weights smaller.",
)
# name -> (experts, weight seed, new tokens). The dense model generates 32 tokens
# (43 positions span six 8-token KV blocks). The MoE model generates 8: its random
# router has no trained margins, and over 32 tokens bf16 drift meets fp32 near-ties
# (measured at seed 11: top-2 margins 0.0079 and 0.0046, under ROUTING_MARGIN), after
# which expert choice, not arithmetic, decides the logits. The MoE seed was picked for
# clear margins over its ~70 routing decisions.
MODELS = {"llama": (0, 0, 32), "moe": (4, 11, 8)}
MODEL_OPS = (
    "linear",
    "rms_norm",
    "rotary_embedding",
    "attention_decode",
    "silu_and_mul",
    "fused_moe",
)
PROVIDER_SETS = ("native", "platform", "torch", "inductor", "triton", "zentorch")
# Smallest gap between the top_k-th and the next expert's fp32 router logit, over every
# token and layer. bf16 activations move the router logits by up to ~0.015 (measured:
# native and torch providers, cpu), and a swap needs a move of half the gap on two logits.
ROUTING_MARGIN = 0.03
# The triton interpreter costs seconds per kernel launch on the CPU: the dense model
# covers every triton kernel the MoE model would call.
INTERPRETED_ON_SMALLEST = {"triton": "llama"}


def _registry(platform: Any, provider_set: str) -> registry.Registry:
    if provider_set == "platform":
        return registry.Registry.for_platform(platform)
    return registry.Registry({op: (provider_set,) for op in OP_NAMES}, device=platform.device)


def _same_as_platform(platform: Any, provider_set: str) -> bool:
    """Whether the platform's kernels, for every op the models call, are ``provider_set``
    then native (or native alone where ``provider_set`` has no kernel for the op: the
    single-provider registry falls back to native there too)."""
    kernels = platform.matrix.resolved.get("kernels", {})
    has = set(get_provider(provider_set, platform.device).ops())
    for op in MODEL_OPS:
        listed = list(kernels.get(op, ["native"]))
        same = [[provider_set, "native"], [provider_set]] if op in has else [["native"]]
        if listed not in same:
            return False
    return True


@pytest.fixture(scope="module")
def encoding() -> Any:
    return get_encoding()


def _check_routing(
    cfg: DecoderConfig, got: torch.Tensor, want: torch.Tensor, record_property: Any, key: str
) -> None:
    top = want.topk(cfg.top_k + 1, dim=-1).values
    margin = float((top[..., -2] - top[..., -1]).min())
    drift = float((got - want).abs().max())
    record_property(f"routing.{key}.margin", f"{margin:.4g}")
    record_property(f"routing.{key}.drift", f"{drift:.4g}")
    assert margin >= ROUTING_MARGIN, (
        f"{key}: fp32 routing has a near-tie (top-{cfg.top_k} margin {margin:.4g} < "
        f"{ROUTING_MARGIN}): pick another model seed or prompt"
    )
    assert 2 * drift < margin, (
        f"{key}: router logits moved by {drift:.4g} from fp32, enough to swap experts "
        f"separated by {margin:.4g}"
    )
    chosen = got.topk(cfg.top_k, dim=-1).indices.sort(dim=-1).values
    assert torch.equal(chosen, want.topk(cfg.top_k, dim=-1).indices.sort(dim=-1).values), (
        f"{key}: routed to different experts than fp32"
    )


def _attempt(failures: list[AssertionError], check: Callable[..., Any], *args: Any,
             **kwargs: Any) -> None:
    try:
        check(*args, **kwargs)
    except AssertionError as error:
        failures.append(error)


def _fail(failures: list[AssertionError]) -> None:
    """One failure of every check; LaneDataMissing only when the lane's golden file lacking
    is all that failed (what a known failure of a lane without its file may expect)."""
    text = "\n".join(str(f) for f in failures)
    if failures and all(isinstance(f, LaneDataMissing) for f in failures):
        raise LaneDataMissing(text)
    if failures:
        raise AssertionError(text)


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
        if _same_as_platform(platform, provider_set):
            pytest.skip(f"the platform provider set is {provider_set} then native")
    only = INTERPRETED_ON_SMALLEST.get(provider_set)
    if only and only != model_name and platform.device == "cpu":
        pytest.skip(f"{provider_set} is interpreted on the CPU; covered by the {only} model")
    dtype = torch.bfloat16 if "bfloat16" in platform.dtypes else torch.float32
    experts, seed, new_tokens = MODELS[model_name]
    cfg = DecoderConfig(vocab=encoding.n_vocab, experts=experts)
    model = TinyDecoder(cfg, dtype, seed)
    reference = TinyDecoder(cfg, torch.float32, seed, weights_dtype=dtype)
    record_property("provider", provider_set)
    # Every prompt runs (and is recorded under --update-expectations) before a failure
    # is raised, so one bad sequence does not hide the state of the others.
    failures: list[AssertionError] = []
    # Kernels may write only the outputs their op declares: an engine shares its weights
    # across requests, so a kernel that rewrites one (a weight cache reordering in place)
    # corrupts every later call, whichever provider makes it.
    pristine = {name: t.clone() for name, t in model.tensors().items()}
    for p, text in enumerate(PROMPTS):
        prompt = encoding.encode(text)
        routing, ref_routing = new_routing(model), new_routing(reference)
        with registry.using(_registry(platform, provider_set)):
            ids, logits = generate(model, prompt, new_tokens, routing)
        with registry.using(registry.Registry({})):
            ref = teacher_forced_logits(reference, prompt, ids, ref_routing)
        failed_before = len(failures)
        written = [n for n, t in model.tensors().items() if not torch.equal(t, pristine[n])]
        if written:
            failures.append(AssertionError(
                f"prompt{p}: provider set {provider_set} wrote into the model's weights: "
                + ", ".join(written)
            ))
        # ascii(): generated bytes can be control characters, which XML cannot hold.
        record_property(f"text.{p}", ascii(encoding.decode(ids)))
        if cfg.experts:
            _attempt(
                failures,
                _check_routing,
                cfg,
                router_logits(routing),
                router_logits(ref_routing),
                record_property,
                f"prompt{p}",
            )
        _attempt(
            failures,
            record_numerics,
            logits,
            ref,
            tolerance(dtype, "e2e_logits"),
            op=f"e2e.{model_name}.prompt{p}",
            provider=provider_set,
            dtype=str(dtype).removeprefix("torch."),
        )
        # Ids last, and only from a sequence that passed the checks above: an update must
        # never write a broken kernel's output into the golden file.
        if len(failures) == failed_before:
            _attempt(failures, golden.check, f"{model_name}/{provider_set}/prompt{p}", ids)
        elif golden.update:
            failures.append(AssertionError(f"prompt{p}: ids not recorded as golden (checks "
                                           "above failed)"))
    _fail(failures)
