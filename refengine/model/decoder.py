"""A tiny Llama-style decoder (optionally with MoE MLPs), a paged KV cache, greedy generation.

Weights come from a fixed seed (no download). Every op goes through refengine's custom
ops, so the registry's provider choice applies to the whole model. Attention always
reads the paged cache through ``attention_decode``: a prefill is a decode step with all
the prompt's queries at once.

The MoE router (gate weights, router logits, softmax and top-k) runs in fp32 whatever
the model dtype, as vLLM's fp32 gating does: in bf16 the router logits are rounded to
8 bits and a close second and third expert swap places, which changes the model's
output far more than any kernel difference. ``routing`` (a list) collects each MoE
layer's fp32 router logits so a caller can check the top-k margins.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import refengine.ops as R


@dataclass(frozen=True, kw_only=True)
class DecoderConfig:
    vocab: int
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    inter: int = 128
    experts: int = 0  # 0: dense MLP
    top_k: int = 2
    max_pos: int = 256
    block_size: int = 8
    eps: float = 1e-6


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
        gen = torch.Generator().manual_seed(seed)
        stored = weights_dtype or dtype

        def fp32(*shape: int, scale: float | None = None) -> torch.Tensor:
            s = shape[-1] ** -0.5 if scale is None else scale
            return torch.randn(*shape, generator=gen) * s

        def w(*shape: int, scale: float | None = None) -> torch.Tensor:
            return fp32(*shape, scale=scale).to(stored).to(dtype)

        def norm() -> torch.Tensor:
            return (1.0 + 0.1 * torch.randn(cfg.hidden, generator=gen)).to(stored).to(dtype)

        c = cfg
        qkv_rows = (c.heads + 2 * c.kv_heads) * c.head_dim
        self.embed = w(c.vocab, c.hidden, scale=1.0)
        self.layers = []
        for _ in range(c.layers):
            layer = {
                "ln1": norm(),
                "wqkv": w(qkv_rows, c.hidden),
                "wo": w(c.hidden, c.heads * c.head_dim),
                "ln2": norm(),
            }
            if c.experts:
                layer |= {
                    "router": fp32(c.experts, c.hidden),  # the gate stays fp32
                    "w13": w(c.experts, 2 * c.inter, c.hidden),
                    "w2": w(c.experts, c.hidden, c.inter),
                }
            else:
                layer |= {"w13": w(2 * c.inter, c.hidden), "w2": w(c.hidden, c.inter)}
            self.layers.append(layer)
        self.ln_f = norm()
        self.lm_head = w(c.vocab, c.hidden)
        self.cos_sin = _rope_cache(c.max_pos, c.head_dim).to(stored).to(dtype)

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every weight by name (``layers.0.wqkv``), to check that no kernel wrote into one."""
        named = {
            "embed": self.embed,
            "ln_f": self.ln_f,
            "lm_head": self.lm_head,
            "cos_sin": self.cos_sin,
        }
        for i, layer in enumerate(self.layers):
            named |= {f"layers.{i}.{k}": v for k, v in layer.items()}
        return named


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


Routing = list[list[torch.Tensor]]  # [MoE layer][forward call] -> router logits [S, E]


def forward(
    model: TinyDecoder,
    tokens: torch.Tensor,
    cache: PagedKVCache,
    routing: Routing | None = None,
) -> torch.Tensor:
    """Run ``tokens`` [S] after the cached ones; returns fp32 logits [S, vocab]."""
    c = model.cfg
    s = tokens.shape[0]
    positions = torch.arange(cache.length, cache.length + s)
    context = torch.tensor([cache.length + s], dtype=torch.int32)
    x = model.embed[tokens]
    for i, layer in enumerate(model.layers):
        h = R.rms_norm(x, layer["ln1"], c.eps)
        qkv = R.linear(h, layer["wqkv"], None)
        q, k, v = torch.split(
            qkv, [c.heads * c.head_dim, c.kv_heads * c.head_dim, c.kv_heads * c.head_dim], dim=-1
        )
        q, k = R.rotary_embedding(
            positions, q.contiguous(), k.contiguous(), model.cos_sin, c.head_dim, True
        )
        cache.write(
            i, positions, k.view(s, c.kv_heads, c.head_dim), v.reshape(s, c.kv_heads, c.head_dim)
        )
        attn = R.attention_decode(
            q.view(1, s, c.heads, c.head_dim),
            cache.k[i],
            cache.v[i],
            cache.block_table[None],
            context,
        )
        x = x + R.linear(attn.reshape(s, -1), layer["wo"], None)
        h = R.rms_norm(x, layer["ln2"], c.eps)
        if c.experts:
            logits = R.linear(h.float(), layer["router"], None)
            if routing is not None:
                routing[i].append(logits)
            mlp = R.fused_moe(h, logits, layer["w13"], layer["w2"], c.top_k, True)
        else:
            mlp = R.linear(R.silu_and_mul(R.linear(h, layer["w13"], None)), layer["w2"], None)
        x = x + mlp
    cache.length += s
    return R.linear(R.rms_norm(x, model.ln_f, c.eps), model.lm_head, None).float()


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
