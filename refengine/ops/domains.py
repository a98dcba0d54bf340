"""The domain of each op argument: the values a kernel must be checked on.

A kernel that ignores an argument the cases never vary passes every case. So each op
declares, per argument (or per property of one: a layout, a size class), the named values
that make a kernel take a different path, and ``classify`` says which value one concrete
call has. The parity suite checks every provider on every value at least once (and the
scaled GEMMs' scale shapes pairwise), and prints the values a provider never saw.

Size classes follow the kernels' limits:
- ``multi-tile``: a row wider than one Triton block (refengine.triton_kernels._rows caps a
  block at TILE_CAP columns), so the second and later tiles' offsets are exercised;
- ``large-k``: a reduction long enough (K >= LARGE_K) that a float16 / bfloat16 accumulator
  visibly loses the sum, where an fp32 (or int32) one does not.

``vector``: whether a row's width is a whole number of VECTOR-element vectors
(``aligned``) or leaves a tail (``odd``). A vectorised kernel runs its main loop alone
on an aligned row and a tail loop besides on an odd one; engines' CPU kernels (vLLM's)
refuse odd widths outright, so they must still be checked on aligned ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

TILE_CAP = 4096  # refengine.triton_kernels._rows.tiles' cap on a block's width
LARGE_K = 2048
# an epsilon that moves a norm of unit-variance rows by ~5%: past the bf16 / fp16 tolerance
# (rtol 1.6e-2), so a kernel that drops it fails at every dtype, not only in fp32
LARGE_EPS = 1e-1
VECTOR = 8  # elements of the narrowest vector a CPU kernel steps by (8 x fp32 in AVX2)

Domains = Mapping[str, tuple[str, ...]]

LAYOUT = ("contiguous", "strided")
VECTOR_FIT = ("odd", "aligned")

DOMAINS: dict[str, Domains] = {
    "linear": {"bias": ("none", "given"), "layout": LAYOUT, "rank": ("2d", "3d+"),
               "k": ("small", "large-k")},
    "rms_norm": {"eps": ("small", "large"), "layout": LAYOUT, "rank": ("2d", "3d+"),
                 "width": ("one-tile", "multi-tile"), "vector": VECTOR_FIT},
    # the residual is written in place: its own layout (a strided 3-D+ residual has
    # leading dims that no rows view can merge, so a kernel must write it back itself)
    "add_rms_norm": {"eps": ("small", "large"), "layout": LAYOUT, "rank": ("2d", "3d+"),
                     "width": ("one-tile", "multi-tile"), "residual": LAYOUT,
                     "vector": VECTOR_FIT},
    # one token without a token dim ([2d]: the spec's T... may be empty)
    "silu_and_mul": {"layout": LAYOUT, "rank": ("1d", "2d", "3d+"),
                     "width": ("one-tile", "multi-tile"), "vector": VECTOR_FIT},
    "gelu_and_mul": {"approximate": ("none", "tanh"), "layout": LAYOUT, "rank": ("2d", "3d+"),
                     "vector": VECTOR_FIT},
    "rotary_embedding": {"is_neox": ("true", "false"), "rotary_dim": ("full", "partial"),
                         "heads": ("flat", "split"), "layout": LAYOUT,
                         "kv_heads": ("equal", "grouped")},
    "fp8_quant": {"mode": ("per_tensor_static", "per_tensor_dynamic", "per_token_dynamic",
                           "block"),
                  "layout": LAYOUT, "rank": ("2d", "3d+"), "width": ("one-tile", "multi-tile"),
                  "last_group": ("full", "partial"), "zero_row": ("absent", "present")},
    "fp8_block_gemm": {"out_dtype": ("bfloat16", "float32"), "rank": ("2d", "3d+"),
                       "last_group": ("full", "partial")},
    "fp8_scaled_gemm": {"a_scales": ("per-tensor", "per-token"),
                        "w_scales": ("per-tensor", "per-channel"), "bias": ("none", "given"),
                        "out_dtype": ("bfloat16", "float32"), "k": ("small", "large-k")},
    "int8_scaled_gemm": {"a_scales": ("per-tensor", "per-token"),
                         "w_scales": ("per-tensor", "per-channel"), "bias": ("none", "given"),
                         "layout": LAYOUT, "rank": ("2d", "3d+"), "k": ("small", "large-k")},
    "attention_prefill": {"scale": ("default", "other"), "causal": ("true", "false"),
                          "kv_heads": ("equal", "grouped"), "layout": LAYOUT},
    "attention_decode": {"scale": ("default", "other"), "queries": ("one", "several"),
                         "kv_heads": ("equal", "grouped")},
    "fused_moe": {"renormalize": ("true", "false"), "top_k": ("1", "several")},
}

# Pairs of arguments whose combinations a kernel gets wrong together (a per-token
# activation scale with a per-tensor weight scale, say): every pair of values must occur.
PAIRWISE: dict[str, tuple[tuple[str, str], ...]] = {
    # scales come back shaped by the leading dims in the per-token and block modes
    "fp8_quant": (("mode", "rank"),),
    "fp8_scaled_gemm": (("a_scales", "w_scales"),),
    "int8_scaled_gemm": (("a_scales", "w_scales"),),
}


# Combinations no call can have (the case generator skips them): a block-mode row's
# "width" is its group's (FP8_BLOCK, one tile), and only block mode has groups.
ALLOWED: dict[str, Callable[[Mapping[str, str]], bool]] = {
    # a 1-D slice of a wider row is contiguous
    "silu_and_mul": lambda v: v["rank"] != "1d" or v["layout"] == "contiguous",
    "fp8_quant": lambda v: ((v["mode"] != "block" or v["width"] == "one-tile")
                            and (v["mode"] == "block" or v["last_group"] == "full")),
}


def _layout(args: Mapping[str, Any]) -> str:
    tensors = [v for v in args.values() if isinstance(v, torch.Tensor)]
    return "contiguous" if all(t.is_contiguous() for t in tensors) else "strided"


def _rank(t: torch.Tensor) -> str:
    return "1d" if t.dim() == 1 else "2d" if t.dim() == 2 else "3d+"


def _width(n: int) -> str:
    return "multi-tile" if n > TILE_CAP else "one-tile"


def _vector(n: int) -> str:
    return "odd" if n % VECTOR else "aligned"


def _k(n: int) -> str:
    return "large-k" if n >= LARGE_K else "small"


def _scales(s: torch.Tensor, per: str) -> str:
    return "per-tensor" if s.numel() == 1 else per


def _heads(hq: int, hkv: int) -> str:
    return "equal" if hq == hkv else "grouped"


def _dtype(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


def _norm(a: Mapping[str, Any]) -> dict[str, str]:
    x = a["x"]
    values = {"eps": "large" if a["eps"] >= LARGE_EPS else "small",
              "layout": _layout({k: v for k, v in a.items() if k != "residual"}),
              "rank": _rank(x), "width": _width(x.shape[-1]), "vector": _vector(x.shape[-1])}
    if "residual" in a:
        values["residual"] = _layout({"residual": a["residual"]})
    return values


def _rope(a: Mapping[str, Any]) -> dict[str, str]:
    q, k, d = a["query"], a["key"], a["head_size"]
    split = q.dim() > a["positions"].dim() + 1
    hq = q.shape[-2] if split else q.shape[-1] // d
    hkv = k.shape[-2] if split else k.shape[-1] // d
    return {"is_neox": str(bool(a["is_neox"])).lower(),
            "rotary_dim": "full" if a["cos_sin_cache"].shape[-1] == d else "partial",
            "heads": "split" if split else "flat", "layout": _layout(a),
            "kv_heads": _heads(hq, hkv)}


def _quant(a: Mapping[str, Any]) -> dict[str, str]:
    x, mode = a["x"], a["mode"]
    width = x.shape[-1] if mode != "block" else a["group_size"]
    partial = mode == "block" and x.shape[-1] % a["group_size"]
    zero = bool(x.numel()) and bool((x.reshape(-1, x.shape[-1]) == 0).all(dim=-1).any())
    return {"mode": mode, "layout": _layout(a), "rank": _rank(x), "width": _width(width),
            "last_group": "partial" if partial else "full",
            "zero_row": "present" if zero else "absent"}


def _scaled(a: Mapping[str, Any]) -> dict[str, str]:
    return {"a_scales": _scales(a["a_scales"], "per-token"),
            "w_scales": _scales(a["w_scales"], "per-channel"),
            "bias": "none" if a["bias"] is None else "given",
            "out_dtype": _dtype(a["out_dtype"]), "k": _k(a["a"].shape[-1])}


def _attention_scale(q: torch.Tensor, scale: float) -> str:
    return "default" if abs(scale - q.shape[-1] ** -0.5) < 1e-9 else "other"


CLASSIFY: dict[str, Callable[[Mapping[str, Any]], dict[str, str]]] = {
    "linear": lambda a: {"bias": "none" if a["bias"] is None else "given",
                         "layout": _layout(a), "rank": _rank(a["x"]),
                         "k": _k(a["x"].shape[-1])},
    "rms_norm": _norm,
    "add_rms_norm": _norm,
    "silu_and_mul": lambda a: {"layout": _layout(a), "rank": _rank(a["x"]),
                               "width": _width(a["x"].shape[-1] // 2),
                               "vector": _vector(a["x"].shape[-1] // 2)},
    "gelu_and_mul": lambda a: {"approximate": a["approximate"], "layout": _layout(a),
                               "rank": _rank(a["x"]), "vector": _vector(a["x"].shape[-1] // 2)},
    "rotary_embedding": _rope,
    "fp8_quant": _quant,
    "fp8_block_gemm": lambda a: {
        "out_dtype": _dtype(a["out_dtype"]), "rank": _rank(a["a"]),
        "last_group": "partial" if a["a"].shape[-1] % 128 else "full"},
    "fp8_scaled_gemm": _scaled,
    # int8's out_dtype is the parity dtype (every platform dtype), not a per-case value
    "int8_scaled_gemm": lambda a: {**{k: v for k, v in _scaled(a).items() if k != "out_dtype"},
                                   "layout": _layout(a), "rank": _rank(a["a"])},
    "attention_prefill": lambda a: {
        "scale": _attention_scale(a["q"], a["scale"]), "causal": str(bool(a["causal"])).lower(),
        "kv_heads": _heads(a["q"].shape[-2], a["k"].shape[-2]), "layout": _layout(a)},
    "attention_decode": lambda a: {
        "scale": _attention_scale(a["q"], a["scale"]),
        "queries": "one" if a["q"].shape[1] == 1 else "several",
        "kv_heads": _heads(a["q"].shape[-2], a["k_cache"].shape[-2])},
    "fused_moe": lambda a: {"renormalize": str(bool(a["renormalize"])).lower(),
                            "top_k": "1" if a["top_k"] == 1 else "several"},
}


def classify(op: str, bound: Mapping[str, Any]) -> dict[str, str]:
    """argument (or property) -> the domain value this call has."""
    values = CLASSIFY[op](bound)
    for name, value in values.items():
        if value not in DOMAINS[op][name]:
            raise ValueError(f"{op}: {name}={value!r} is outside its declared domain "
                             f"{DOMAINS[op][name]}")
    return values


def missing(op: str, seen: list[dict[str, str]],
            extra: Mapping[str, tuple[str, ...]] | None = None) -> list[str]:
    """``arg=value`` (and ``a=x & b=y`` pairs) that none of ``seen`` covered; ``extra``
    adds domains the platform declares (the dtypes it runs the op on)."""
    domains = {**DOMAINS[op], **(extra or {})}
    out = [f"{name}={value}" for name, values in domains.items() for value in values
           if not any(s.get(name) == value for s in seen)]
    for a, b in PAIRWISE.get(op, ()):
        for va in domains[a]:
            for vb in domains[b]:
                if not any(s.get(a) == va and s.get(b) == vb for s in seen):
                    out.append(f"{a}={va} & {b}={vb}")
    return out
