"""The decoder layer every refengine model uses, and a tiny Llama-style decoder built from it
(optionally with MoE MLPs), with a paged KV cache and greedy generation.

Weights come from a fixed seed (no download, model/weights.py). Every op goes through
refengine's custom ops, so the registry's provider choice applies to the whole model.
The decoder's attention always reads the paged cache through ``attention_decode``: a
prefill is a decode step with all the prompt's queries at once. The fusion suite compiles
one layer alone (model/blocks.py), with causal attention over its own tokens instead.

The MoE router (gate weights, router logits, softmax and top-k) runs in fp32 whatever
the model dtype, as vLLM's fp32 gating does: in bf16 the router logits are rounded to
8 bits and a close second and third expert swap places, which changes the model's
output far more than any kernel difference. ``routing`` (a list) collects each MoE
layer's fp32 router logits so a caller can check the top-k margins.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

import refengine.ops as R
from refengine.model.weights import SeededWeights, frozen


@dataclass(frozen=True, kw_only=True)
class LayerConfig:
    """One decoder layer's shape."""

    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    inter: int = 128
    experts: int = 0  # 0: dense MLP
    top_k: int = 2
    eps: float = 1e-6


@dataclass(frozen=True, kw_only=True)
class DecoderConfig(LayerConfig):
    vocab: int
    layers: int = 2
    max_pos: int = 256
    block_size: int = 8


class PagedKVCache:
    """Per layer k/v caches [num_blocks, block_size, kv_heads, head_dim]; one sequence."""

    def __init__(self, cfg: DecoderConfig, dtype: torch.dtype, max_tokens: int) -> None:
        self.block_size = cfg.block_size
        blocks = -(-max_tokens // cfg.block_size)
        shape = (blocks + 1, cfg.block_size, cfg.kv_heads, cfg.head_dim)
        self.k = [torch.zeros(shape, dtype=dtype) for _ in range(cfg.layers)]
        self.v = [torch.zeros(shape, dtype=dtype) for _ in range(cfg.layers)]
        # Blocks handed out in a scrambled order, so a wrong block-table lookup shows.
        order = torch.randperm(blocks + 1, generator=torch.Generator().manual_seed(7))
        self.block_table = order[:blocks].to(torch.int32)
        self.length = 0

    def write(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        blocks = self.block_table[positions // self.block_size].long()
        offsets = positions % self.block_size
        self.k[layer][blocks, offsets] = k
        self.v[layer][blocks, offsets] = v


@dataclass(frozen=True)
class PagedStep:
    """One forward call's new tokens in the paged cache: their positions, the context length
    after them ([1], int32) and the rotary cos/sin cache."""

    cache: PagedKVCache
    positions: torch.Tensor
    context: torch.Tensor
    cos_sin: torch.Tensor


class DecoderLayer(nn.Module):
    """Pre-norm attention and a gated MLP (dense, or MoE with an fp32 router) over tokens
    [S, hidden]. ``forward(x, residual)`` returns ``(out, residual)``; the caller adds the
    two before the next norm (``residual=None``: ``x`` is the residual stream itself), so an
    add and a norm stand together as in real engines' graphs.

    Attention, with a ``PagedStep``: rotary embedding, the new k/v written into the cache,
    ``attention_decode`` over it. Without one: causal ``attention_prefill`` over the call's
    tokens alone. ``fp8_dtype`` (dense only): the qkv, gate/up and down projections take
    fp8 activations into fp8 GEMMs, on weights quantised per tensor once."""

    def __init__(self, cfg: LayerConfig, weights: SeededWeights,
                 fp8_dtype: torch.dtype | None = None, index: int = 0) -> None:
        super().__init__()
        if fp8_dtype is not None and cfg.experts:
            raise ValueError("fp8 projections are for the dense MLP, not the MoE one")
        c = cfg
        self.cfg, self.dtype, self.fp8, self.index = cfg, weights.dtype, fp8_dtype, index
        self.ln1 = frozen(weights.norm(c.hidden))
        self.wqkv = frozen(weights.weight((c.heads + 2 * c.kv_heads) * c.head_dim, c.hidden))
        self.wo = frozen(weights.weight(c.hidden, c.heads * c.head_dim))
        self.ln2 = frozen(weights.norm(c.hidden))
        if c.experts:
            self.router = frozen(weights.fp32(c.experts, c.hidden))  # the gate stays fp32
            self.w13 = frozen(weights.weight(c.experts, 2 * c.inter, c.hidden))
            self.w2 = frozen(weights.weight(c.experts, c.hidden, c.inter))
        else:
            self.w13 = frozen(weights.weight(2 * c.inter, c.hidden))
            self.w2 = frozen(weights.weight(c.hidden, c.inter))
        if fp8_dtype is not None:
            for name in ("wqkv", "w13", "w2"):
                q, s = R.fp8_quant(getattr(self, name).data, fp8_dtype, "per_tensor_dynamic")
                self.register_buffer(f"{name}_q", q)
                self.register_buffer(f"{name}_s", s)

    def forward(
        self,
        x: torch.Tensor,
        residual: torch.Tensor | None = None,
        step: PagedStep | None = None,
        routing: list[torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``routing``: where an MoE layer appends its router logits."""
        c = self.cfg
        residual = x if residual is None else x + residual
        h = R.rms_norm(residual, self.ln1, c.eps)
        attn = self._attention(self._proj(h, "wqkv"), step)
        residual = R.linear(attn.reshape(-1, c.heads * c.head_dim), self.wo, None) + residual
        h = R.rms_norm(residual, self.ln2, c.eps)
        return self._mlp(h, routing), residual

    def _attention(self, qkv: torch.Tensor, step: PagedStep | None) -> torch.Tensor:
        c = self.cfg
        if step is None:
            heads = qkv.view(1, -1, c.heads + 2 * c.kv_heads, c.head_dim)
            q, k, v = torch.split(heads, [c.heads, c.kv_heads, c.kv_heads], dim=2)
            return R.attention_prefill(q, k, v, c.head_dim**-0.5, True)
        s, kv = qkv.shape[0], c.kv_heads * c.head_dim
        q, k, v = torch.split(qkv, [c.heads * c.head_dim, kv, kv], dim=-1)
        q, k = R.rotary_embedding(
            step.positions, q.contiguous(), k.contiguous(), step.cos_sin, c.head_dim, True
        )
        cache = step.cache
        cache.write(self.index, step.positions, k.view(s, c.kv_heads, c.head_dim),
                    v.reshape(s, c.kv_heads, c.head_dim))
        return R.attention_decode(
            q.view(1, s, c.heads, c.head_dim),
            cache.k[self.index],
            cache.v[self.index],
            cache.block_table[None],
            step.context,
        )

    def _mlp(self, h: torch.Tensor, routing: list[torch.Tensor] | None) -> torch.Tensor:
        c = self.cfg
        if c.experts:
            logits = R.linear(h.float(), self.router, None)
            if routing is not None:
                routing.append(logits)
            return R.fused_moe(h, logits, self.w13, self.w2, c.top_k, True)
        act = R.silu_and_mul(self._proj(h, "w13"))
        if self.fp8 is None:
            return R.linear(act, self.w2, None)
        q, s = R.fp8_quant(act, self.fp8, "per_token_dynamic")
        return self._gemm(q, s, "w2")

    def _proj(self, h: torch.Tensor, name: str) -> torch.Tensor:
        if self.fp8 is None:
            return R.linear(h, getattr(self, name), None)
        q, s = R.fp8_quant(h, self.fp8, "per_token_dynamic")
        return self._gemm(q, s, name)

    def _gemm(self, q: torch.Tensor, s: torch.Tensor, name: str) -> torch.Tensor:
        return R.fp8_scaled_gemm(
            q, s, getattr(self, f"{name}_q"), getattr(self, f"{name}_s"), None, self.dtype
        )


def _rope_cache(max_pos: int, dim: int) -> torch.Tensor:
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv)
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1).float()


class TinyDecoder:
    """``weights_dtype`` (default ``dtype``): the dtype the weights are rounded to before
    the model casts them to ``dtype``. The fp32 reference of a bf16 model is
    ``TinyDecoder(cfg, torch.float32, seed, weights_dtype=torch.bfloat16)``: the same
    parameters, computed in fp32, so what is compared is the arithmetic alone."""

    def __init__(
        self,
        cfg: DecoderConfig,
        dtype: torch.dtype,
        seed: int = 0,
        weights_dtype: torch.dtype | None = None,
    ) -> None:
        self.cfg, self.dtype = cfg, dtype
        draw = SeededWeights(seed, dtype, weights_dtype)
        self.embed = draw.weight(cfg.vocab, cfg.hidden, scale=1.0)
        self.layers = [DecoderLayer(cfg, draw, index=i) for i in range(cfg.layers)]
        self.ln_f = draw.norm(cfg.hidden)
        self.lm_head = draw.weight(cfg.vocab, cfg.hidden)
        self.cos_sin = draw.cast(_rope_cache(cfg.max_pos, cfg.head_dim))

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every weight by name (``layers.0.wqkv``), to check that no kernel wrote into one."""
        named = {
            "embed": self.embed,
            "ln_f": self.ln_f,
            "lm_head": self.lm_head,
            "cos_sin": self.cos_sin,
        }
        for i, layer in enumerate(self.layers):
            named |= {f"layers.{i}.{k}": v for k, v in layer.named_parameters()}
        return named


Routing = list[list[torch.Tensor]]  # [MoE layer][forward call] -> router logits [S, E]


def forward(
    model: TinyDecoder,
    tokens: torch.Tensor,
    cache: PagedKVCache,
    routing: Routing | None = None,
) -> torch.Tensor:
    """Run ``tokens`` [S] after the cached ones; returns fp32 logits [S, vocab]."""
    s = tokens.shape[0]
    step = PagedStep(
        cache=cache,
        positions=torch.arange(cache.length, cache.length + s),
        context=torch.tensor([cache.length + s], dtype=torch.int32),
        cos_sin=model.cos_sin,
    )
    x, residual = model.embed[tokens], None
    for i, layer in enumerate(model.layers):
        x, residual = layer(x, residual, step, routing[i] if routing is not None else None)
    cache.length += s
    final = x if residual is None else x + residual
    final = R.rms_norm(final, model.ln_f, model.cfg.eps)
    return R.linear(final, model.lm_head, None).float()


def router_logits(routing: Routing) -> torch.Tensor:
    """[layers, tokens, experts]: every forward call's router logits, in token order."""
    return torch.stack([torch.cat(calls) for calls in routing])


def new_routing(model: TinyDecoder) -> Routing:
    return [[] for _ in model.layers]


@torch.no_grad()
def generate(
    model: TinyDecoder, prompt: list[int], new_tokens: int, routing: Routing | None = None
) -> tuple[list[int], torch.Tensor]:
    """Greedy: (generated ids, fp32 logits [new_tokens, vocab] that chose them)."""
    cache = PagedKVCache(model.cfg, model.dtype, len(prompt) + new_tokens)
    logits = forward(model, torch.tensor(prompt), cache, routing)[-1:]
    out: list[int] = []
    steps = []
    for _ in range(new_tokens):
        steps.append(logits[-1])
        token = int(logits[-1].argmax())
        out.append(token)
        if len(out) < new_tokens:  # the last token is never fed back
            logits = forward(model, torch.tensor([token]), cache, routing)
    return out, torch.stack(steps)


@torch.no_grad()
def teacher_forced_logits(
    model: TinyDecoder, prompt: list[int], generated: list[int], routing: Routing | None = None
) -> torch.Tensor:
    """Logits that predict each of ``generated`` given everything before it, in one pass.

    The last generated token is not fed (it predicts nothing we compare), so ``routing``
    covers the same tokens as generate()'s.
    """
    seq = prompt + generated[:-1]
    cache = PagedKVCache(model.cfg, model.dtype, len(seq))
    logits = forward(model, torch.tensor(seq), cache, routing)
    return logits[len(prompt) - 1 :]
