"""Run the tensor-parallel block for real over N gloo ranks (local processes).

Each rank installs the registry it is given (the platform's kernels), compiles its shard
with the fusion backend, runs it and the eager graph, and writes its report, the argument
audit, whether the fused path must agree bit for bit, and both outputs to
``<workdir>/rank<i>.pt`` for the parent to check; and the shard's eager output in float32
(``eager_fp32``), which the parent compares with the sharded block's ``unsharded``
counterpart on the same weights. In float32 because the row-parallel partial sums are
rounded to the activation dtype before the all-reduce (as engines do): in bfloat16 that
alone moves a normed output by more than bfloat16's tolerance where the partials cancel,
while a wrong shard moves it by far more in any dtype.

The block is named ``module:attribute`` (default TP_BLOCK), so a test can run a block
that shards its weights differently. ``run_ranks`` runs any ``module:attribute`` function
on N gloo ranks and hands back what each returned (the fusion suite's contract check of a
collective fused op).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import torch

TP_BLOCK = "refengine.model.blocks:TPMLPBlock"


def load_block(spec: str) -> Any:
    """The sharded block class ``module:attribute`` names."""
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def _rank_main(rank: int, world: int, workdir: str, dtype_name: str, fp8_name: str,
               kernels: Any, block_spec: str) -> None:
    import torch.distributed as dist

    from refengine import registry
    from refengine.fusion import FusionBackend, fused_ops
    from refengine.model.blocks import inputs

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{workdir}/rendezvous", rank=rank, world_size=world
    )
    try:
        dtype = getattr(torch, dtype_name)
        block: torch.nn.Module = load_block(block_spec)(dtype, rank, world)
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
            wide = load_block(block_spec)(torch.float32, rank, world)
            eager_fp32 = wide(inputs(torch.float32)[0])
        torch.save(
            {"report": backend.report.as_dict(), "eager": eager, "fused": fused,
             "eager_fp32": eager_fp32,
             "arg_mismatches": backend.report.arg_mismatches, "bitwise": bitwise},
            Path(workdir) / f"rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


def run_tp(
    world: int, workdir: Path, dtype: torch.dtype, fp8_dtype: torch.dtype | None = None,
    kernels: Any = None, block: str = TP_BLOCK,
) -> list[dict[str, Any]]:
    """``kernels``: the refengine Registry each rank installs (None: native only);
    ``block``: the sharded block, ``module:attribute``."""
    workdir.mkdir(parents=True, exist_ok=True)
    names = [str(d).removeprefix("torch.") if d is not None else "" for d in (dtype, fp8_dtype)]
    _spawn(_rank_main, (world, str(workdir), *names, kernels, block), world)
    return [torch.load(workdir / f"rank{r}.pt") for r in range(world)]


def _spawn(main: Any, args: tuple[Any, ...], world: int) -> None:
    """``main(rank, *args)`` on ``world`` ranks. The ranks fork from a server that imported
    torch once for this process (multiprocessing's forkserver), not a fresh interpreter a
    rank: the first call pays one import of torch and dynamo, the next ones almost nothing
    (a test process's collective contract cases and TP block share it). Each rank gets the caller's
    environment as it is now (a forked rank would otherwise see the server's), and its
    sys.path, as a spawned one would."""
    import multiprocessing

    from torch.multiprocessing.spawn import start_processes

    # torch._dynamo: the custom ops' eager calls import it on first use (about 6 s a rank)
    multiprocessing.set_forkserver_preload(["torch", "torch.distributed", "torch._dynamo"])
    # one thread per rank, for the ranks only: the caller's environment is left as it was
    # (a process that ran this once must not hand OMP_NUM_THREADS=1 to what it starts next)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    start_processes(  # type: ignore[no-untyped-call]  # torch.multiprocessing: no annotations
        _in_env, args=(env, main, args), nprocs=world, join=True, start_method="forkserver")


def _in_env(rank: int, env: dict[str, str], main: Any, args: tuple[Any, ...]) -> None:
    os.environ.clear()
    os.environ.update(env)
    main(rank, *args)


def _call_main(rank: int, world: int, workdir: str, fn: str, args: tuple[Any, ...]) -> None:
    import pickle

    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{workdir}/rendezvous", rank=rank, world_size=world
    )
    try:
        try:
            result: dict[str, Any] = {"value": load_block(fn)(rank, world, *args)}
        except Exception as exc:  # handed to the caller, raised there as it was
            result = {"error": exc}
        (Path(workdir) / f"call{rank}.pkl").write_bytes(pickle.dumps(result))
    finally:
        dist.destroy_process_group()


def run_ranks(world: int, workdir: Path, fn: str, args: tuple[Any, ...] = ()) -> list[Any]:
    """``fn(rank, world, *args)`` on each of ``world`` gloo ranks (``fn`` is
    ``module:attribute``, importable in the ranks, which inherit sys.path); what each rank
    returned, in rank order. An exception a rank raised is raised here, as it was (the
    first rank's first), so a caller sees the op's own error, not the spawn's."""
    import pickle

    workdir.mkdir(parents=True, exist_ok=True)
    _spawn(_call_main, (world, str(workdir), fn, args), world)
    results = [pickle.loads((workdir / f"call{r}.pkl").read_bytes()) for r in range(world)]
    for result in results:
        if "error" in result:
            raise result["error"]
    return [result["value"] for result in results]
