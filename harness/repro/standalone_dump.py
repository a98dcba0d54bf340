"""Build one kernel_parity case and print its arguments as JSON (``harness repro --standalone``).

Run in the matrix's environment (it imports torch and the suite's case builders), never at
harness start-up: ``python -m harness.repro.standalone_dump REQUEST_JSON`` with the checkout
and ``suites/kernel_parity`` on ``PYTHONPATH``. The request names the op, the case id, the
dtype, the seed and the sizes to shrink to; the answer holds every argument exactly: a
tensor as its dtype, shape, strides, storage offset and the bytes of its storage up to the
last element the view reaches (base64), so the standalone script rebuilds the same view of
the same bytes. Shrinking slices views (``x[:rows, ..., :width]``): strides stay strides.
"""

from __future__ import annotations

import base64
import importlib
import json
import sys
from typing import TypedDict

# Which dimension of which argument each shrinkable size is: (argument, dim, size name).
# Widths of the norm / activation ops step by 8 (vLLM's VEC_ELEM_NUM; torch's own too).
AXES: dict[str, tuple[tuple[int, int, str], ...]] = {
    "rms_norm": ((0, 0, "rows"), (0, -1, "width"), (1, 0, "width")),
    "add_rms_norm": ((0, 0, "rows"), (0, -1, "width"), (1, 0, "rows"), (1, -1, "width"),
                     (2, 0, "width")),
    "silu_and_mul": ((0, 0, "rows"), (0, -1, "width2")),
    "gelu_and_mul": ((0, 0, "rows"), (0, -1, "width2")),
    "linear": ((0, 0, "rows"), (0, -1, "k"), (1, 0, "n"), (1, 1, "k"), (2, 0, "n")),
    "int8_scaled_gemm": ((0, 0, "rows"), (0, -1, "k"), (1, 0, "rows"), (2, 0, "n"),
                         (2, 1, "k"), (3, 0, "n"), (4, 0, "n")),
    "fused_moe": ((0, 0, "rows"), (1, 0, "rows"), (1, -1, "experts"), (2, 0, "experts"),
                  (3, 0, "experts")),
}
STEP = {"width": 8, "width2": 16}


class DumpRequest(TypedDict):
    """What to build: the case, its seed, and the sizes to shrink to (none: as it is)."""

    op: str
    case: str
    dtype: str
    seed: int
    dtypes: list[str]
    shrink: dict[str, int]


class ArgSpec(TypedDict, total=False):
    """One argument as the script rebuilds it: a tensor (its dtype, shape, strides, storage
    offset and storage bytes), a dtype, or a plain value."""

    tensor: str
    shape: list[int]
    stride: list[int]
    offset: int
    b64: str
    dtype: str
    value: bool | int | float | str | None


class DumpAnswer(TypedDict, total=False):
    """The case built (every argument, its sizes as built and now, each size's step), or
    why it could not be (``error``)."""

    args: list[ArgSpec]
    sizes: dict[str, int]
    now: dict[str, int]
    steps: dict[str, int]
    error: str


def sizes(op: str, args: tuple[object, ...]) -> dict[str, int]:
    import torch

    found: dict[str, int] = {}
    for index, dim, name in AXES.get(op, ()):
        arg = args[index]
        if isinstance(arg, torch.Tensor) and arg.numel() > 1:
            found.setdefault(name, int(arg.shape[dim]))
    return found


def shrink(op: str, args: tuple[object, ...], wanted: dict[str, int]) -> tuple[object, ...]:
    """The arguments sliced to ``wanted`` (views of the same storage)."""
    import torch

    out = list(args)
    for index, dim, name in AXES.get(op, ()):
        arg = out[index]
        if name in wanted and isinstance(arg, torch.Tensor) and arg.numel() > 1:
            out[index] = arg.narrow(dim, 0, min(wanted[name], int(arg.shape[dim])))
    return tuple(out)


def encode(value: object) -> ArgSpec:
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        reach = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride(),
                                                                      strict=True)) + 1
        flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (reach,), (1,))
        raw = flat.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return {"tensor": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                "stride": list(t.stride()), "offset": int(t.storage_offset()),
                "b64": base64.b64encode(raw).decode("ascii")}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    raise TypeError(f"cannot write a {type(value).__name__} argument into a script")


def build(request: DumpRequest) -> DumpAnswer:
    import torch

    cases = importlib.import_module("parity_cases")
    op, dtype = request["op"], getattr(torch, request["dtype"])
    dtypes = tuple(request.get("dtypes") or [request["dtype"]])
    case = next((c for c in cases.cases_for(op, dtypes) if c.id == request["case"]), None)
    if case is None:
        raise LookupError(f"kernel_parity has no case {op}/{request['case']}")
    fp8 = dtype if op in cases.FP8_OPS else None
    act = torch.bfloat16 if op in cases.FP8_OPS else dtype
    args = case.args(act, fp8, "cpu", int(request["seed"]))
    full = sizes(op, args)
    args = shrink(op, args, dict(request.get("shrink") or {}))
    return {"args": [encode(a) for a in args], "sizes": full, "now": sizes(op, args),
            "steps": {k: STEP.get(k, 1) for k in full}}


def main(argv: list[str]) -> int:
    try:
        answer = build(json.loads(argv[0]))
    except (LookupError, TypeError, ValueError) as error:
        print(json.dumps({"error": str(error)}))
        return 2
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
