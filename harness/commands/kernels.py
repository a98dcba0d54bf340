"""`harness kernels --matrix NAME [--op OP] [--dtype D] [--emulate]`: the provider table.

For each op, every candidate provider in the matrix's priority order with chosen /
rejected and the reason, as the registry decides it on this machine.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.errors import InfraError, UsageError

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

    from harness.matrix.model import Matrix
    from harness.platform.kernel_table import KernelCall, OpRow
    from harness.plugin.profile import Profile
    from refengine.registry import Candidate, Registry


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("kernels", help="explain which provider each op gets")
    parser.add_argument("--matrix", required=True, help="matrix name or path")
    parser.add_argument("--op", action="append", default=[], help="only this op (repeatable)")
    parser.add_argument(
        "--dtype", default=None, help="dtype name (default: each of the platform's dtypes)"
    )
    parser.add_argument(
        "--emulate",
        action="store_true",
        help="as under --emulate: on the CPU, hardware-only providers gone",
    )
    parser.add_argument(
        "--python",
        default="matrix",
        metavar="matrix|current|PATH",
        help="ask in the matrix's venv (default: where its providers are "
        "installed), the current interpreter, or another one",
    )
    parser.set_defaults(func=cmd_kernels)


def cmd_kernels(args: argparse.Namespace) -> int:
    from harness.matrix import load_matrix
    from harness.platform.kernel_table import render
    from harness.runners.suite_env import triton_interpreted

    matrix = load_matrix(args.matrix)
    if args.python != "current":
        return _in_interpreter(matrix, args)
    if triton_interpreted(matrix, emulate=args.emulate):
        import os

        os.environ.setdefault("TRITON_INTERPRET", "1")  # as in a suite run
    table, note = explain_rows(matrix, args.op, args.dtype, args.emulate)
    for line in render(table):
        print(line)
    if note:
        print(note)
    return 0


def _in_interpreter(matrix: Matrix, args: argparse.Namespace) -> int:
    """Re-run this command where the matrix's providers live (zentorch is in zen's venv).

    Under --emulate that is the emulation's environment (a CPU torch); without it, a GPU
    matrix needs its GPU here, checked before any environment is built.
    """
    import os

    from harness.platform.cache import cache_root
    from harness.platform.doctor import require_device
    from harness.process.run import run_attached
    from harness.roots import import_path, project_root
    from harness.run.venvs import interpreter
    from harness.runners.suite_env import suite_env

    if args.python == "matrix" and not args.emulate:
        require_device(matrix, command=f"harness kernels --matrix {args.matrix}")
    python = interpreter(args.python, matrix, emulate=args.emulate)
    argv = [python, "-m", "harness", "kernels", "--matrix", args.matrix, "--python", "current"]
    argv += [f"--op={op}" for op in args.op]
    argv += [f"--dtype={args.dtype}"] if args.dtype else []
    argv += ["--emulate"] if args.emulate else []
    from harness.platform.cpu_emulation import lane_environ

    # less the agent's host-tuned CPU settings, on a lane whose CPU is emulated
    env = lane_environ(matrix) | suite_env(matrix, project_root(),
                                 import_root=import_path(cache_root(matrix)),
                                 inherited_pythonpath=os.environ.get("PYTHONPATH"),
                                 emulate=args.emulate)
    return run_attached(argv, env=env)


def explain_rows(matrix: Matrix, ops: list[str], dtype: str | None,
                 emulate: bool) -> tuple[list[OpRow], str]:
    """The table for this host, and a note when no suite offers its calls."""
    try:
        import torch
    except ImportError as error:
        import sys

        raise InfraError(
            f"{sys.executable} has no torch ({error}); run without --python current to use "
            f"the matrix's environment, or add --emulate for a GPU matrix on this CPU"
        ) from None
    import os

    # Imported here, after the torch check: refengine imports torch.
    from harness.matrix.known_failures import entries_for
    from harness.platform.host import cpu_flags, kernel_cpu_flags
    from harness.platform.kernel_table import rows
    from harness.plugin.profile import Profile
    from harness.roots import project_root
    from refengine.ops.spec import OP_NAMES, describe
    from refengine.registry import Registry

    unknown = [op for op in ops if op not in OP_NAMES]
    if unknown:
        raise UsageError(f"--op {unknown[0]}: unknown op (known: {', '.join(OP_NAMES)})")
    profile = Profile(matrix=matrix, emulate=emulate)
    registry = Registry.for_platform(profile, use_env=False)

    def explain(op: str, _dtype: str, args: tuple[object, ...]) -> list[Candidate]:
        info = describe(op, args)
        return registry.explain(op, info.dtype, info.shapes, info.layout)

    entries = entries_for(matrix, emulate=emulate,
                          host_flags=kernel_cpu_flags(cpu_flags(), os.environ))
    calls = _suite_calls(matrix, profile, project_root())
    if calls is None:
        return _shapeless(matrix, registry, ops, dtype, torch), (
            "(no suite of this matrix offers kernel_calls (docs/byo-suite.md): each op "
            "explained without shapes)")
    return rows(calls, explain, entries, ops, dtype), ""


def _suite_calls(matrix: Matrix, profile: Profile, root: Path) -> list[KernelCall] | None:
    from harness.platform.suite_hooks import hooks_of

    found = hooks_of(matrix, root, "kernel_calls")
    if not found:
        return None
    return [call for hooks in found for call in hooks.module.kernel_calls(profile)]


def _shapeless(matrix: Matrix, registry: Registry, ops: list[str], dtype: str | None,
               torch: ModuleType) -> list[OpRow]:
    """Each op walked without shapes (a matrix whose suites offer no calls): its fp8
    flavours for an fp8 op, else the platform's dtypes; a dtype this torch lacks says so."""
    from harness.platform.kernel_table import OpRow
    from refengine.ops.spec import OP_NAMES
    from refengine.registry import Candidate

    fp8_ops = ("fp8_quant", "fp8_block_gemm", "fp8_scaled_gemm")
    out = []
    for op in ops or [o for o in OP_NAMES if o in matrix.kernels]:
        if dtype:
            names = [dtype]
        elif op in fp8_ops:
            names = [n for n in (matrix.fp8.e4m3, matrix.fp8.e5m2) if n] or ["(no fp8)"]
        else:
            names = list(matrix.dtypes)
        for name in names:
            torch_dtype = getattr(torch, name, None)
            walk = (registry.explain(op, torch_dtype) if isinstance(torch_dtype, torch.dtype)
                    else [Candidate("-", False, f"torch {torch.__version__} has no {name}")])
            out.append(OpRow(op=op, dtype=name, walk=walk))
    return out
