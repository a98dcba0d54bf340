"""Per op, the source a standalone repro script holds: the reference and the engine call.

Plain text (no torch here). The reference is refengine/ops/reference.py's written out; the
engine call is refengine/providers/vllm_provider.py's adaptation (the ``out!`` tensors, the
copies, the oneDNN handlers), calling ``torch.ops._C`` of the library the script loaded.
Each op's pair defines ``reference(*args)`` and ``engine_call(*args)``, both returning a
tuple of the tensors to compare (an op that writes an argument in place returns it too).
"""

from __future__ import annotations

RMS = '''
def _rms(xf, weight, eps):
    variance = xf.pow(2).mean(dim=-1, keepdim=True)
    return xf * torch.rsqrt(variance + eps) * weight.float()
'''

MOE = '''
def route(router_logits, top_k, renormalize):
    probs = router_logits.float().softmax(dim=-1)
    weights, ids = probs.topk(top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids


def reference(x, router_logits, w13, w2, top_k, renormalize):
    weights, ids = route(router_logits, top_k, renormalize)
    xf = x.float()
    out = torch.zeros_like(xf)
    inter = w2.shape[2]
    for expert in range(w13.shape[0]):
        tokens, slot = (ids == expert).nonzero(as_tuple=True)
        if tokens.numel() == 0:
            continue
        hidden = xf[tokens] @ w13[expert].float().t()
        act = torch.nn.functional.silu(hidden[:, :inter]) * hidden[:, inter:]
        out.index_add_(0, tokens, (act @ w2[expert].float().t()) * weights[tokens, slot, None])
    return (out.to(x.dtype),)


# --- engine call: vLLM's CPU MoE layer: routing in fp32, the intermediate size padded to 32,
# prepack_moe_weight + cpu_fused_moe ---
def engine_call(x, router_logits, w13, w2, top_k, renormalize):
    pad = torch.nn.functional.pad
    # AMX as vLLM meets it: bf16 on an AMX CPU with its AMX build (_C) loaded
    amx = (torch.cpu._is_amx_tile_supported() and x.dtype == torch.bfloat16
           and LOADED.get("library") == "_C")
    isa = "amx" if amx else "vec"
    weights, ids = route(router_logits, top_k, renormalize)
    inter = w2.shape[2]
    padded = -(-inter // 32) * 32
    if padded != inter:
        grow = (0, 0, 0, padded - inter)
        w13 = torch.cat((pad(w13[:, :inter], grow), pad(w13[:, inter:], grow)), dim=1)
        w2 = pad(w2, (0, padded - inter))
    w13, w2 = w13.contiguous(), w2.contiguous()
    packed13, packed2 = torch.empty_like(w13), torch.empty_like(w2)
    torch.ops._C.prepack_moe_weight(w13, packed13, isa)
    torch.ops._C.prepack_moe_weight(w2, packed2, isa)
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    torch.ops._C.cpu_fused_moe(out, x.contiguous(), packed13, packed2, None, None,
                               weights.contiguous(), ids.to(torch.int32).contiguous(), False,
                               "silu", isa)
    return (out,)
# --- end of engine call ---
'''

OPS: dict[str, str] = {
    "rms_norm": RMS + '''

def reference(x, weight, eps):
    return (_rms(x.float(), weight, eps).to(x.dtype),)


# --- engine call: vLLM's rms_norm(out!, input, weight, epsilon) ---
def engine_call(x, weight, eps):
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    torch.ops._C.rms_norm(out, x, weight, eps)
    return (out,)
# --- end of engine call ---
''',
    "add_rms_norm": RMS + '''

def reference(x, residual, weight, eps):
    summed = (x.float() + residual.float()).to(residual.dtype)
    residual.copy_(summed)
    return (_rms(summed.float(), weight, eps).to(x.dtype), residual)


# --- engine call: vLLM's fused_add_rms_norm(input!, residual!, weight, epsilon) ---
# it writes the normed rows into its input (a copy here) and the sum into the residual
def engine_call(x, residual, weight, eps):
    out = x.clone(memory_format=torch.contiguous_format)
    torch.ops._C.fused_add_rms_norm(out, residual, weight, eps)
    return (out, residual)
# --- end of engine call ---
''',
    "silu_and_mul": '''
def reference(x):
    d = x.shape[-1] // 2
    xf = x.float()
    return ((torch.nn.functional.silu(xf[..., :d]) * xf[..., d:]).to(x.dtype),)


# --- engine call: vLLM's silu_and_mul(out!, input) ---
def engine_call(x):
    out = torch.empty((*x.shape[:-1], x.shape[-1] // 2), dtype=x.dtype)
    torch.ops._C.silu_and_mul(out, x)
    return (out,)
# --- end of engine call ---
''',
    "gelu_and_mul": '''
def reference(x, approximate):
    d = x.shape[-1] // 2
    xf = x.float()
    gelu = torch.nn.functional.gelu(xf[..., :d], approximate=approximate)
    return ((gelu * xf[..., d:]).to(x.dtype),)


# --- engine call: vLLM's gelu_and_mul / gelu_tanh_and_mul(out!, input) ---
def engine_call(x, approximate):
    out = torch.empty((*x.shape[:-1], x.shape[-1] // 2), dtype=x.dtype)
    kernel = "gelu_tanh_and_mul" if approximate == "tanh" else "gelu_and_mul"
    getattr(torch.ops._C, kernel)(out, x)
    return (out,)
# --- end of engine call ---
''',
    "linear": '''
def reference(x, weight, bias):
    out = x.float() @ weight.float().t()
    if bias is not None:
        out = out + bias.float()
    return (out.to(x.dtype),)


# --- engine call: vLLM's dispatch_cpu_unquantized_gemm (oneDNN) ---
# the weight as vLLM's loader leaves it: contiguous [N, K], handed over as .t()
def engine_call(x, weight, bias):
    n, k = weight.shape
    handler = torch.ops._C.create_onednn_mm_handler(weight.contiguous().t(), 32)
    try:
        out = torch.empty((*x.shape[:-1], n), dtype=x.dtype)
        torch.ops._C.onednn_mm(out.view(-1, n), x.reshape(-1, k), bias, torch.tensor(handler))
    finally:
        torch.ops._C.release_dnnl_matmul_handler(handler)
    return (out,)
# --- end of engine call ---
''',
    "int8_scaled_gemm": '''
def reference(a, a_scales, w, w_scales, bias, out_dtype):
    # int32 accumulation is exact
    acc = (a.to(torch.int32) @ w.to(torch.int32).t()).float()
    out = acc * a_scales.float() * w_scales.float().reshape(-1)
    if bias is not None:
        out = out + bias.float()
    return (out.to(out_dtype),)


# --- engine call: vLLM's create_onednn_scaled_mm_handler + onednn_scaled_mm (W8A8) ---
def engine_call(a, a_scales, w, w_scales, bias, out_dtype):
    n, k = w.shape
    w = w.contiguous()
    per_token = a_scales.numel() > 1
    handler = torch.ops._C.create_onednn_scaled_mm_handler(
        w.t(), w_scales.float().reshape(-1), out_dtype, per_token, False, 32)
    try:
        out = torch.empty((*a.shape[:-1], n), dtype=out_dtype)
        scales = (a_scales.float().reshape(-1, 1) if per_token
                  else a_scales.float().reshape(()))
        torch.ops._C.onednn_scaled_mm(out.view(-1, n), a.reshape(-1, k), scales, None, None,
                                      None if bias is None else bias.to(out_dtype),
                                      torch.tensor(handler))
    finally:
        torch.ops._C.release_dnnl_matmul_handler(handler)
    return (out,)
# --- end of engine call ---
''',
    "fused_moe": MOE,
}
