"""The calls a provider rightly passes to the next one: each a fact about a library on a
device, with its reason. test_selection.py walks the matrix's providers past them;
test_coverage.py allows a checked provider to turn down these cases and no others (and
fails on an entry that no longer happens)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FNUZ = ("float8_e4m3fnuz", "float8_e5m2fnuz")


@dataclass(frozen=True)
class Decline:
    """``provider`` rightly passes ``op`` at these key dtypes to the next on these devices."""

    provider: str
    op: str  # "*": every op
    dtypes: tuple[str, ...]
    devices: tuple[str, ...]  # torch device types
    why: str

    def applies(self, provider: str, op: str, dtype: str, device: str) -> bool:
        return (provider == self.provider and self.op in ("*", op)
                and dtype in self.dtypes and device in self.devices)


DECLINES = (
    Decline("triton", "fp8_quant", FNUZ, ("cpu",),
            "Triton's interpreter has no fnuz fp8 types (emulated ROCm gfx942)"),
    Decline("torch", "fused_moe", ("float32", "float16"), ("cuda", "xpu"),
            "torch._grouped_mm on a GPU takes bfloat16 only"),
    Decline("zentorch", "*", ("float16",), ("cpu",), "zentorch kernels take float32/bfloat16"),
)


def decline_holes(op: str, provider: str, declined: Sequence[tuple[str, str, str]],
                  dtypes: Sequence[str], device: str) -> list[str]:
    """A provider the suite checks turning a case (case id, dtype, why) down turns that
    case's parity test into a skip, so a wrong ``supports`` (or a kernel wrongly dropped)
    would pass unseen: every decline must be declared, and every declared one must happen."""
    def declared(dtype: str) -> bool:
        return any(d.applies(provider, op, dtype, device) for d in DECLINES)

    holes = [f"{provider} declined {case} {dtype} ({why}), which no DECLINES entry declares"
             for case, dtype, why in declined if not declared(dtype)]
    turned_down = {dtype for _, dtype, _ in declined}
    holes += [f"{provider}'s declared decline at {dtype} did not happen (a stale entry)"
              for dtype in dtypes if declared(dtype) and dtype not in turned_down]
    return holes
