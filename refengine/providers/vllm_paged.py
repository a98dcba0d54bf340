"""The ``vllm`` provider's attention and MoE: vLLM's CPU paged attention and fused MoE.

Both are called as vLLM's CPU backends call them (vllm/v1/attention/backends/cpu_attn.py,
vllm/model_executor/layers/fused_moe/experts/cpu_moe.py), and the adaptation is only
what those layers do:

- Attention: vLLM's cache is ``[num_blocks, kv_heads, 2 * block_size, head_size]`` (keys
  then values in each block), filled by ``cpu_attn_reshape_and_cache`` through a slot
  mapping; ``get_scheduler_metadata`` plans the work and
  ``cpu_attention_with_kv_cache`` runs it over variable-length queries (query_start_loc)
  against whole sequences (seq_lens). Our paged caches (``[num_blocks, block_size,
  kv_heads, head_size]``) are read token by token (refengine.ops.reference.gather_paged)
  and written into a vLLM cache of vLLM's own block size through its own kernel, so its
  block table, slot mapping and cache layout are exercised, not ours. The ISA hint is
  vLLM's ``_get_attn_isa``: ``vec16`` for head sizes that are a multiple of 16 but not
  32, ``amx`` for bf16 on AMX, else ``vec``.
- AMX, for attention and MoE alike, as vLLM meets it: only where it loads ``_C`` (the
  AVX-512 BF16 / AMX build). A smaller library loaded on an AMX CPU stands for a host
  without AMX (the vllm-cpu-avx2 lane): there vLLM would never ask for ``amx``, and
  ``_C_AVX2`` has no AMX attention ("Unsupported CPU attention configuration ... isa=0").
- fused_moe: routing in fp32 (softmax, top-k, renormalise) as vLLM's CPURouter does,
  then ``prepack_moe_weight`` + ``cpu_fused_moe``; the intermediate size is zero-padded
  to a multiple of 32 as the layer pads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from refengine.ops.reference import gather_paged, route
from refengine.providers.vllm_library import kernel_library

BLOCK = 32  # vLLM's CPU attention block size (a multiple of 32 for the vec/amx kernels)
HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)  # CPU_ATTN's list
MOE_ALIGN = 32  # cpu_moe's output alignment (hidden and padded intermediate sizes)


def _c() -> Any:
    return torch.ops._C


def amx(dtype: torch.dtype) -> bool:
    """Whether vLLM would take its AMX kernels for ``dtype`` here: bf16 on an AMX CPU, with
    the AMX build (``_C``) loaded."""
    return (dtype == torch.bfloat16 and torch.cpu._is_amx_tile_supported()
            and kernel_library() == "_C")


def attention_isa(dtype: torch.dtype, head_size: int) -> str:
    if head_size % 32 != 0 and head_size % 16 == 0:
        return "vec16"
    return "amx" if amx(dtype) else "vec"


def supports(op: str, dtype: torch.dtype, shapes: Mapping[str, Any]) -> tuple[bool, str]:
    if op.startswith("attention_"):
        d = (shapes.get("q") or (0,))[-1]
        if d not in HEAD_SIZES:
            return False, f"vLLM's CPU attention has no head size {d}"
        if dtype not in (torch.float32, torch.bfloat16, torch.float16):
            return False, f"vLLM's CPU attention takes float dtypes, not {dtype}"
    if op == "fused_moe":
        h = (shapes.get("x") or (0, 0))[-1]
        if h % MOE_ALIGN:
            return False, f"vLLM's CPU MoE needs a hidden size divisible by {MOE_ALIGN} ({h})"
    return True, ""


def _attend(query: torch.Tensor, keys: list[torch.Tensor], values: list[torch.Tensor],
            q_lens: list[int], scale: float, causal: bool) -> torch.Tensor:
    """vLLM's paged attention over sequences: query [tokens, Hq, D] (each sequence's
    last q_lens[i] positions), keys/values [len_i, Hkv, D] per sequence -> [tokens, Hq, D]."""
    hq, d = query.shape[1:]
    hkv = keys[0].shape[1]
    dtype = query.dtype
    isa = attention_isa(dtype, d)
    blocks = [-(-k.shape[0] // BLOCK) for k in keys]
    cache = torch.zeros(sum(blocks), hkv, 2 * BLOCK, d, dtype=dtype)
    key_cache, value_cache = cache.chunk(2, dim=2)
    table = torch.zeros(len(keys), max(blocks), dtype=torch.int32)
    first = 0
    for i, count in enumerate(blocks):
        table[i, :count] = torch.arange(first, first + count, dtype=torch.int32)
        slots = (first * BLOCK + torch.arange(keys[i].shape[0])).to(torch.int64)
        _c().cpu_attn_reshape_and_cache(keys[i].contiguous(), values[i].contiguous(),
                                        key_cache, value_cache, slots, isa)
        first += count
    seq_lens = torch.tensor([k.shape[0] for k in keys], dtype=torch.int32)
    starts = torch.tensor([0, *q_lens], dtype=torch.int32).cumsum(0, dtype=torch.int32)
    metadata = _c().get_scheduler_metadata(len(keys), hq, hkv, d, seq_lens, dtype, starts,
                                           causal, -1, isa, False, None)
    out = torch.empty_like(query)
    _c().cpu_attention_with_kv_cache(query.contiguous(), key_cache, value_cache, out, starts,
                                     seq_lens, scale, causal, None, -1, table, 0.0, metadata,
                                     None, None)
    return out


def attention_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                      causal: bool) -> torch.Tensor:
    b, s = q.shape[:2]
    out = _attend(q.reshape(b * s, *q.shape[2:]), list(k.unbind(0)), list(v.unbind(0)),
                  [s] * b, scale, causal)
    return out.reshape(q.shape)


def attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     block_tables: torch.Tensor, context_lens: torch.Tensor,
                     scale: float) -> torch.Tensor:
    b, n_new = q.shape[:2]
    lens = [int(n) for n in context_lens.tolist()]
    keys = [gather_paged(k_cache, block_tables[i], n) for i, n in enumerate(lens)]
    values = [gather_paged(v_cache, block_tables[i], n) for i, n in enumerate(lens)]
    out = _attend(q.reshape(b * n_new, *q.shape[2:]), keys, values, [n_new] * b, scale, True)
    return out.reshape(q.shape)


def _pad_intermediate(w13: torch.Tensor, w2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    inter = w2.shape[2]
    padded = -(-inter // MOE_ALIGN) * MOE_ALIGN
    if padded == inter:
        return w13.contiguous(), w2.contiguous()
    gate, up = w13[:, :inter], w13[:, inter:]
    grow = (0, 0, 0, padded - inter)
    w13p = torch.cat((F.pad(gate, grow), F.pad(up, grow)), dim=1)
    return w13p.contiguous(), F.pad(w2, (0, padded - inter)).contiguous()


def fused_moe(x: torch.Tensor, router_logits: torch.Tensor, w13: torch.Tensor,
              w2: torch.Tensor, top_k: int, renormalize: bool) -> torch.Tensor:
    isa = "amx" if amx(x.dtype) else "vec"
    weights, ids = route(router_logits, top_k, renormalize)
    w13p, w2p = _pad_intermediate(w13, w2)
    packed13, packed2 = torch.empty_like(w13p), torch.empty_like(w2p)
    _c().prepack_moe_weight(w13p, packed13, isa)
    _c().prepack_moe_weight(w2p, packed2, isa)
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _c().cpu_fused_moe(out, x.contiguous(), packed13, packed2, None, None,
                       weights.contiguous(), ids.to(torch.int32).contiguous(), False, "silu",
                       isa)
    return out
