"""Run the tensor-parallel block for real over N gloo ranks (local processes).

Each rank installs the registry it is given (the platform's kernels), compiles its shard
with the fusion backend, runs it and the eager graph, and writes its report, the argument
audit, whether the fused path must agree bit for bit, and both outputs to
``<workdir>/rank<i>.pt`` for the parent to check.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch


def _rank_main(rank: int, world: int, workdir: str, dtype_name: str, fp8_name: str,
               kernels: Any) -> None:
    import torch.distributed as dist

    from refengine import registry
    from refengine.fusion import FusionBackend, fused_ops
    from refengine.model.blocks import TPMLPBlock, inputs

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{workdir}/rendezvous", rank=rank, world_size=world
    )
    try:
        dtype = getattr(torch, dtype_name)
        block = TPMLPBlock(dtype, rank, world)
        x, _ = inputs(dtype)
        backend = FusionBackend(fp8_dtype=getattr(torch, fp8_name) if fp8_name else None)
        with registry.using(kernels or registry.Registry({})), torch.no_grad():
            eager = block(x)
            fused = torch.compile(block, backend=backend, fullgraph=True)(x)
            bitwise = all(
                fused_ops.fused_provider(d.fused_op)[0] == "native"
                for d, _ in backend.matchers
                if backend.report.passes.get(d.name) and backend.report.passes[d.name].matched
            )
        torch.save(
            {"report": backend.report.as_dict(), "eager": eager, "fused": fused,
             "arg_mismatches": backend.report.arg_mismatches, "bitwise": bitwise},
            Path(workdir) / f"rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


def run_tp(
    world: int, workdir: Path, dtype: torch.dtype, fp8_dtype: torch.dtype | None = None,
    kernels: Any = None,
) -> list[dict[str, Any]]:
    """``kernels``: the refengine Registry each rank installs (None: native only)."""
    from torch.multiprocessing.spawn import spawn

    workdir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    names = [str(d).removeprefix("torch.") if d is not None else "" for d in (dtype, fp8_dtype)]
    spawn(  # type: ignore[no-untyped-call]  # torch.multiprocessing.spawn has no annotations
        _rank_main, args=(world, str(workdir), *names, kernels), nprocs=world, join=True
    )
    return [torch.load(workdir / f"rank{r}.pt") for r in range(world)]
