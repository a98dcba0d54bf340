"""A case's arguments as a standalone script holds them (for a suite's ``standalone`` hook).

Run in the matrix's environment, by the hook (it imports torch, never at harness start-up).
Every argument exactly: a tensor as its dtype, shape, strides, storage offset and the bytes
of its storage up to the last element the view reaches (base64), so the standalone script
rebuilds the same view of the same bytes. Shrinking slices views (``x[:rows, ..., :width]``
of the same storage, the axes the hook names): strides stay strides.
"""

from __future__ import annotations

import base64
from typing import TypedDict

# Which dimension of which argument each shrinkable size is: (argument, dim, size name).
Axes = tuple[tuple[int, int, str], ...]


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


def sizes(axes: Axes, args: tuple[object, ...]) -> dict[str, int]:
    """Each size's value in ``args`` (the first axis of that name that has it)."""
    import torch

    found: dict[str, int] = {}
    for index, dim, name in axes:
        arg = args[index]
        if isinstance(arg, torch.Tensor) and arg.numel() > 1:
            found.setdefault(name, int(arg.shape[dim]))
    return found


def shrink(axes: Axes, args: tuple[object, ...],
           wanted: dict[str, int]) -> tuple[object, ...]:
    """The arguments sliced to ``wanted`` (views of the same storage)."""
    import torch

    out = list(args)
    for index, dim, name in axes:
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
