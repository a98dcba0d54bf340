"""The ``native`` implementations: plain torch, fp32 math, cast at the end.

These define correct for every provider (see spec.py for the contracts). Clarity beats
speed here; only the paged-attention gather is vectorised because tests call it often.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from refengine.ops.spec import FP8_BLOCK, MIN_SCALE, fp8_max, n_groups


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    out = x.float() @ weight.float().t()
    if bias is not None:
        out = out + bias.float()
    return out.to(x.dtype)


def _rms(xf: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    variance = xf.pow(2).mean(dim=-1, keepdim=True)
    return xf * torch.rsqrt(variance + eps) * weight.float()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return _rms(x.float(), weight, eps).to(x.dtype)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                 eps: float) -> torch.Tensor:
    summed = (x.float() + residual.float()).to(residual.dtype)
    residual.copy_(summed)
    return _rms(summed.float(), weight, eps).to(x.dtype)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    xf = x.float()
    return (F.silu(xf[..., :d]) * xf[..., d:]).to(x.dtype)


def gelu_and_mul(x: torch.Tensor, approximate: str) -> torch.Tensor:
    d = x.shape[-1] // 2
    xf = x.float()
    return (F.gelu(xf[..., :d], approximate=approximate) * xf[..., d:]).to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            is_neox: bool) -> torch.Tensor:
    """x [..., H, rot_dim] fp32; cos/sin [..., 1, rot_dim // 2]."""
    if is_neox:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)


def _rope_one(positions: torch.Tensor, t: torch.Tensor, cos_sin_cache: torch.Tensor,
              head_size: int, is_neox: bool) -> torch.Tensor:
    flat = t.dim() == positions.dim() + 1
    heads = t.reshape(*positions.shape, -1, head_size).float()
    rot_dim = cos_sin_cache.shape[-1]
    cos, sin = cos_sin_cache.float()[positions].unsqueeze(-2).chunk(2, dim=-1)
    rotated = _rotate(heads[..., :rot_dim], cos, sin, is_neox)
    out = torch.cat((rotated, heads[..., rot_dim:]), dim=-1).to(t.dtype)
    return out.reshape(t.shape) if flat else out


def rotary_embedding(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
                     cos_sin_cache: torch.Tensor, head_size: int,
                     is_neox: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return (_rope_one(positions, query, cos_sin_cache, head_size, is_neox),
            _rope_one(positions, key, cos_sin_cache, head_size, is_neox))


def _quantize(xf: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    fmax = fp8_max(dtype)
    return (xf / scale).clamp(-fmax, fmax).to(dtype)


def fp8_quant(x: torch.Tensor, fp8_dtype: torch.dtype, mode: str, scale: torch.Tensor | None,
              group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    fmax = fp8_max(fp8_dtype)
    if mode == "per_tensor_static":
        if scale is None:
            raise ValueError("fp8_quant: per_tensor_static needs a scale")
        scales = scale.float().reshape(1)
        return _quantize(xf, scales, fp8_dtype), scales.clone()
    if mode == "per_tensor_dynamic":
        scales = (xf.abs().amax().clamp(min=MIN_SCALE * fmax) / fmax).reshape(1)
        return _quantize(xf, scales, fp8_dtype), scales
    if mode == "per_token_dynamic":
        scales = xf.abs().amax(dim=-1, keepdim=True).clamp(min=MIN_SCALE * fmax) / fmax
        return _quantize(xf, scales, fp8_dtype), scales
    if mode == "block":
        k = x.shape[-1]
        groups = n_groups(k, group_size)
        padded = F.pad(xf, (0, groups * group_size - k))
        blocks = padded.reshape(*x.shape[:-1], groups, group_size)
        scales = blocks.abs().amax(dim=-1).clamp(min=MIN_SCALE * fmax) / fmax
        q = _quantize(blocks, scales.unsqueeze(-1), fp8_dtype)
        return q.reshape(*x.shape[:-1], groups * group_size)[..., :k].contiguous(), scales
    raise ValueError(f"fp8_quant: unknown mode {mode!r}")


def expand_block_scales(scales: torch.Tensor, rows: int, cols: int, block_rows: int,
                        block_cols: int) -> torch.Tensor:
    """Repeat per-block scales to one per element, trimming partial edge blocks."""
    full = scales.repeat_interleave(block_rows, dim=-2).repeat_interleave(block_cols, dim=-1)
    return full[..., :rows, :cols]


def fp8_block_gemm(a: torch.Tensor, a_scales: torch.Tensor, w: torch.Tensor,
                   w_scales: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    k = a.shape[-1]
    n = w.shape[0]
    a_deq = a.float() * a_scales.float().repeat_interleave(FP8_BLOCK, dim=-1)[..., :k]
    w_deq = w.float() * expand_block_scales(w_scales.float(), n, k, FP8_BLOCK, FP8_BLOCK)
    return (a_deq @ w_deq.t()).to(out_dtype)


def _scaled_epilogue(acc: torch.Tensor, a_scales: torch.Tensor, w_scales: torch.Tensor,
                     bias: torch.Tensor | None, out_dtype: torch.dtype) -> torch.Tensor:
    out = acc * a_scales.float() * w_scales.float().reshape(-1)
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype)


def fp8_scaled_gemm(a: torch.Tensor, a_scales: torch.Tensor, w: torch.Tensor,
                    w_scales: torch.Tensor, bias: torch.Tensor | None,
                    out_dtype: torch.dtype) -> torch.Tensor:
    return _scaled_epilogue(a.float() @ w.float().t(), a_scales, w_scales, bias, out_dtype)


def int8_scaled_gemm(a: torch.Tensor, a_scales: torch.Tensor, w: torch.Tensor,
                     w_scales: torch.Tensor, bias: torch.Tensor | None,
                     out_dtype: torch.dtype) -> torch.Tensor:
    # int32 accumulation is exact; fp32 would round once |acc| passes 2**24.
    acc = (a.to(torch.int32) @ w.to(torch.int32).t()).float()
    return _scaled_epilogue(acc, a_scales, w_scales, bias, out_dtype)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
            mask: torch.Tensor | None) -> torch.Tensor:
    """q [Sq, Hq, D], k/v [Sk, Hkv, D] fp32; mask [Sq, Sk] True = may attend."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(dim=-1), v)


def attention_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                      causal: bool) -> torch.Tensor:
    s = q.shape[1]
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).tril() if causal else None
    outs = [_attend(q[b].float(), k[b].float(), v[b].float(), scale, mask)
            for b in range(q.shape[0])]
    return torch.stack(outs).to(q.dtype)


def gather_paged(cache: torch.Tensor, block_table: torch.Tensor, length: int) -> torch.Tensor:
    """The first ``length`` tokens of one sequence from a paged cache -> [length, H, D]."""
    block_size = cache.shape[1]
    blocks = block_table[: n_groups(length, block_size)].long()
    return cache[blocks].reshape(-1, *cache.shape[2:])[:length]


def attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     block_tables: torch.Tensor, context_lens: torch.Tensor,
                     scale: float) -> torch.Tensor:
    n_new = q.shape[1]
    outs = []
    for b in range(q.shape[0]):
        length = int(context_lens[b])
        k = gather_paged(k_cache, block_tables[b], length).float()
        v = gather_paged(v_cache, block_tables[b], length).float()
        query_pos = torch.arange(length - n_new, length, device=q.device)
        mask = torch.arange(length, device=q.device)[None, :] <= query_pos[:, None]
        outs.append(_attend(q[b].float(), k, v, scale, mask))
    return torch.stack(outs).to(q.dtype)


def route(router_logits: torch.Tensor, top_k: int,
          renormalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights fp32 [T, top_k], expert ids int64 [T, top_k])."""
    probs = router_logits.float().softmax(dim=-1)
    weights, ids = probs.topk(top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids


def fused_moe(x: torch.Tensor, router_logits: torch.Tensor, w13: torch.Tensor,
              w2: torch.Tensor, top_k: int, renormalize: bool) -> torch.Tensor:
    weights, ids = route(router_logits, top_k, renormalize)
    xf = x.float()
    out = torch.zeros_like(xf)
    for expert in range(w13.shape[0]):
        tokens, slot = (ids == expert).nonzero(as_tuple=True)
        if tokens.numel() == 0:
            continue
        hidden = xf[tokens] @ w13[expert].float().t()
        act = F.silu(hidden[:, : w2.shape[2]]) * hidden[:, w2.shape[2]:]
        y = act @ w2[expert].float().t()
        out.index_add_(0, tokens, y * weights[tokens, slot, None])
    return out.to(x.dtype)
