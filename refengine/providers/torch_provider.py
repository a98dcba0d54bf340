"""``torch``: torch's own fast paths, which dispatch to cuBLAS / hipBLASLt / oneDNN per device.

Each kernel computes in the input dtype (as the vendor libraries do), not in fp32 like
``native``: the difference is exactly what the parity suite measures. Ops torch has no
fast path for (rotary embedding, fp8 quantization) are not offered; ``supports`` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from refengine.ops.reference import gather_paged, route
from refengine.providers import TableProvider

FLOATS = (torch.float32, torch.bfloat16, torch.float16)
FNUZ = (torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)
NO_FAST_PATH = {
    "rotary_embedding": "torch has no fused rotary-embedding kernel",
    "fp8_quant": "torch has no fused fp8 quantization kernel",
    "fp8_block_gemm": ("torch scaled_mm rejects BlockWise1x128 x BlockWise128x128 scaling "
                       "on the CPU; the CUDA sm90 path is not wired here"),
}


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return F.linear(x, weight, bias)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight.to(x.dtype), eps)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                 eps: float) -> torch.Tensor:
    residual.add_(x)
    return F.rms_norm(residual.to(x.dtype), (x.shape[-1],), weight.to(x.dtype), eps)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def gelu_and_mul(x: torch.Tensor, approximate: str) -> torch.Tensor:
    d = x.shape[-1] // 2
    return F.gelu(x[..., :d], approximate=approximate) * x[..., d:]


def _scaled_mm(a: torch.Tensor, a_scales: torch.Tensor, w: torch.Tensor, w_scales: torch.Tensor,
               bias: torch.Tensor | None, out_dtype: torch.dtype) -> torch.Tensor:
    a2 = a.reshape(-1, a.shape[-1]).contiguous()
    m, n = a2.shape[0], w.shape[0]
    sa, sw = a_scales.float().reshape(-1, 1), w_scales.float().reshape(1, -1)
    if sa.numel() > 1 or sw.numel() > 1:  # _scaled_mm takes both row-wise or both per-tensor
        sa, sw = sa.expand(m, 1).contiguous(), sw.expand(1, n).contiguous()
    else:
        sa, sw = sa.reshape(()), sw.reshape(())
    # w is [N, K] row-major, so w.t() is the column-major operand _scaled_mm wants.
    out = torch._scaled_mm(a2, w.contiguous().t(), scale_a=sa, scale_b=sw, bias=bias,
                           out_dtype=out_dtype)
    return out.reshape(*a.shape[:-1], n)


def fp8_scaled_gemm(a: torch.Tensor, a_scales: torch.Tensor, w: torch.Tensor,
                    w_scales: torch.Tensor, bias: torch.Tensor | None,
                    out_dtype: torch.dtype) -> torch.Tensor:
    return _scaled_mm(a, a_scales, w, w_scales, bias, out_dtype)


def int8_scaled_gemm(a: torch.Tensor, a_scales: torch.Tensor, w: torch.Tensor,
                     w_scales: torch.Tensor, bias: torch.Tensor | None,
                     out_dtype: torch.dtype) -> torch.Tensor:
    a2 = a.reshape(-1, a.shape[-1]).contiguous()
    acc = torch._int_mm(a2, w.contiguous().t()).float()
    out = acc * a_scales.float().reshape(-1, 1) * w_scales.float().reshape(1, -1)
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype).reshape(*a.shape[:-1], w.shape[0])


def attention_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                      causal: bool) -> torch.Tensor:
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         is_causal=causal, scale=scale, enable_gqa=True)
    return out.transpose(1, 2).contiguous()


def attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     block_tables: torch.Tensor, context_lens: torch.Tensor,
                     scale: float) -> torch.Tensor:
    n_new = q.shape[1]
    outs = []
    for b, length in enumerate(context_lens.tolist()):
        k = gather_paged(k_cache, block_tables[b], length).transpose(0, 1)[None]
        v = gather_paged(v_cache, block_tables[b], length).transpose(0, 1)[None]
        query_pos = torch.arange(length - n_new, length, device=q.device)
        mask = torch.arange(length, device=q.device)[None, :] <= query_pos[:, None]
        out = F.scaled_dot_product_attention(q[b].transpose(0, 1)[None], k, v, attn_mask=mask,
                                             scale=scale, enable_gqa=True)
        outs.append(out[0].transpose(0, 1))
    return torch.stack(outs)


def fused_moe(x: torch.Tensor, router_logits: torch.Tensor, w13: torch.Tensor,
              w2: torch.Tensor, top_k: int, renormalize: bool) -> torch.Tensor:
    weights, ids = route(router_logits, top_k, renormalize)
    flat = ids.flatten()
    order = flat.argsort(stable=True)
    tokens = order // top_k
    offs = torch.bincount(flat, minlength=w13.shape[0]).cumsum(0).to(torch.int32)
    hidden = torch._grouped_mm(x[tokens], w13.transpose(1, 2), offs=offs)
    inter = w2.shape[2]
    act = F.silu(hidden[:, :inter]) * hidden[:, inter:]
    y = torch._grouped_mm(act, w2.transpose(1, 2), offs=offs).float()
    y = y * weights.flatten()[order, None]
    return torch.zeros_like(x, dtype=torch.float32).index_add_(0, tokens, y).to(x.dtype)


class TorchProvider(TableProvider):
    name = "torch"

    def supports(self, op: str, dtype: torch.dtype, shapes: Mapping[str, Any],
                 layout: str) -> tuple[bool, str]:
        if op in NO_FAST_PATH:
            return False, NO_FAST_PATH[op]
        ok, reason = super().supports(op, dtype, shapes, layout)
        if not ok:
            return ok, reason
        check = _CHECKS.get(op)
        return check(self.device.split(":")[0], dtype, shapes) if check else (True, "")


def _gpu_gemm_dims(device: str, shapes: Mapping[str, Any], multiple: int,
                   what: str) -> tuple[bool, str]:
    w = shapes.get("w")
    if device == "cpu" or w is None:  # no shapes given (e.g. `harness kernels`): dtype only
        return True, ""
    k, n = w[1], w[0]
    if k % multiple or n % multiple:
        return False, f"{what} on {device} needs K and N multiples of {multiple} (K={k}, N={n})"
    return True, ""


def _check_fp8_scaled(device: str, dtype: torch.dtype,
                      shapes: Mapping[str, Any]) -> tuple[bool, str]:
    if device == "cuda":
        if torch.version.hip is None and dtype in FNUZ:
            return False, f"torch._scaled_mm on CUDA has no {dtype} (OCP fp8 only)"
        if torch.version.hip is None and torch.cuda.get_device_capability() < (8, 9):
            return False, "torch._scaled_mm needs compute capability >= 8.9"
    if len(shapes.get("a", (0, 0))) != 2:
        return False, "torch._scaled_mm takes a 2-D activation"
    return _gpu_gemm_dims(device, shapes, 16, "torch._scaled_mm")


def _check_int_mm(device: str, dtype: torch.dtype,
                  shapes: Mapping[str, Any]) -> tuple[bool, str]:
    if device != "cpu" and "a" in shapes:
        m = 1
        for size in shapes["a"][:-1]:
            m *= size
        if m <= 16:
            return False, f"torch._int_mm on {device} needs more than 16 rows (M={m})"
    return _gpu_gemm_dims(device, shapes, 8, "torch._int_mm")


def _check_moe(device: str, dtype: torch.dtype, shapes: Mapping[str, Any]) -> tuple[bool, str]:
    if not hasattr(torch, "_grouped_mm"):  # torch < 2.8 (Debian's 2.6 on s390x)
        return False, f"torch {torch.__version__} has no torch._grouped_mm"
    if device != "cpu" and dtype != torch.bfloat16:
        return False, f"torch._grouped_mm on {device} takes bfloat16 only"
    return True, ""


def _check_float(device: str, dtype: torch.dtype, shapes: Mapping[str, Any]) -> tuple[bool, str]:
    if dtype not in FLOATS:
        return False, f"no {dtype} kernel"
    return True, ""


_CHECKS: dict[str, Callable[[str, torch.dtype, Mapping[str, Any]], tuple[bool, str]]] = {
    "linear": _check_float,
    "fp8_scaled_gemm": _check_fp8_scaled,
    "int8_scaled_gemm": _check_int_mm,
    "fused_moe": _check_moe,
}

_IMPLS: dict[str, Callable[..., Any]] = {
    "linear": linear,
    "rms_norm": rms_norm,
    "add_rms_norm": add_rms_norm,
    "silu_and_mul": silu_and_mul,
    "gelu_and_mul": gelu_and_mul,
    "fp8_scaled_gemm": fp8_scaled_gemm,
    "int8_scaled_gemm": int8_scaled_gemm,
    "attention_prefill": attention_prefill,
    "attention_decode": attention_decode,
    "fused_moe": fused_moe,
}


def make_provider(device: str) -> TorchProvider:
    return TorchProvider(device, _IMPLS)
