"""The collective ``refengine::all_reduce``: the unfused all-reduce a tensor-parallel block
calls, and that the fusion passes fuse with the norm after it.

A functional custom op (a new output, not an in-place update), so a compiled graph holds
it as one node. It is not one of spec.py's ops: it has no providers, it calls
torch.distributed over the process group it is named.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.library import custom_op

from refengine.ops.custom import fake

Tensor = torch.Tensor


def process_group(group_name: str) -> Any:
    """The process group ``group_name`` names (the name a graph can hold as a constant)."""
    from torch._C._distributed_c10d import _resolve_process_group
    from torch.distributed.distributed_c10d import GroupName

    return _resolve_process_group(GroupName(group_name))


def world_group_name() -> str:
    return str(dist.group.WORLD.group_name)  # type: ignore[union-attr]


@custom_op("refengine::all_reduce", mutates_args=())
def all_reduce(x: Tensor, group_name: str) -> Tensor:
    out = x.clone()
    dist.all_reduce(out, group=process_group(group_name))
    return out


@fake("refengine::all_reduce")
def _all_reduce_fake(x: Tensor, group_name: str) -> Tensor:
    return torch.empty_like(x)
