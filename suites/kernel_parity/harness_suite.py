"""What this suite offers harness beyond its tests (docs/byo-suite.md, "A suite's hooks").

``kernel_calls``: the calls its tests make, for ``harness kernels`` to explain with the
shapes the suite really runs: the engine-shaped call of each op (the one test_selection.py
judges the provider table on) and every parity case, with the node id each case's test of
a provider has. ``standalone``: a parity case of the vllm provider as a script of its own
for ``harness repro --standalone`` (which ops, which files: parity_standalone.py). harness
imports this module from the suite's folder, in the matrix's environment; it never reads
the suite's other modules.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from parity_cases import FP8_OPS, SELECTION_CASES, case_dtypes, cases_for, dtypes_for

from refengine.ops.spec import OP_NAMES

TEST = "suites/kernel_parity/test_parity.py::test_parity"


def kernel_calls(profile: Any) -> Iterator[dict[str, Any]]:
    """For each op the platform lists and each dtype it runs: the engine-shaped call
    (``engine: True``, case ``typical``), then each parity case. ``args`` builds the call;
    ``test_id`` is the parity test's node id with ``{provider}`` left to fill."""
    import torch

    for op in OP_NAMES:
        if op not in profile.matrix.kernels:
            continue
        dtypes = dtypes_for(profile, op)
        for dtype in (d for d in dtypes if d):
            fp8 = getattr(torch, dtype, None) if op in FP8_OPS else None
            act = torch.bfloat16 if op in FP8_OPS else getattr(torch, dtype, None)
            if act is None or (op in FP8_OPS and fp8 is None):
                continue
            yield {"op": op, "dtype": dtype, "case": "typical", "engine": True,
                   "args": _builder(SELECTION_CASES[op], act, fp8), "test_id": ""}
            for case in cases_for(op, tuple(d for d in dtypes if d)):
                if dtype not in case_dtypes(case, dtypes):
                    continue
                yield {"op": op, "dtype": dtype, "case": case.id, "engine": False,
                       "args": _builder(case, act, fp8),
                       "test_id": f"{TEST}[{op}-{case.id}-{dtype}-{{provider}}-cpu]"}


def _builder(case: Any, act: Any, fp8: Any) -> Any:
    return lambda: case.args(act, fp8, "cpu", 0)


def standalone(test_id: str, request: Any) -> dict[str, Any] | None:
    """``harness repro --standalone``: the script of a parity case of the vllm provider
    (None: not this suite's test; ValueError: a case without a script), its arguments built
    here as the suite builds them (seed, the sizes to shrink to), its code taken from the
    suite's files (parity_standalone.py), ``request.expected`` written in."""
    from parity_standalone import AXES, STEP, op_code, parse_test_id

    from harness.repro.standalone_dump import encode, shrink, sizes
    from harness.repro.standalone_render import FRAME_NAMES, Script, render

    case = parse_test_id(test_id)
    if case is None:
        return None
    args = _case_args(case, request.matrix.dtypes, request.seed)
    axes = AXES.get(case.op, ())
    full = sizes(axes, args)
    specs = [encode(a) for a in shrink(axes, args, dict(request.shrink))]
    out_dtype = next((a["dtype"] for a in specs if "dtype" in a), case.dtype)
    tol, _ = request.matrix.tolerances.lookup(out_dtype, case.op)
    script = Script(test_id=case.test_id, op=case.op, args=specs,
                    tolerance={"atol": tol.atol, "rtol": tol.rtol}, env=request.env,
                    expected=request.expected, origin=request.origin, shrunk=request.shrunk,
                    pins=request.pins)
    code = op_code(case.op, root=request.root, reserved=FRAME_NAMES)
    return {"text": render(script, code), "sizes": full,
            "steps": {k: STEP.get(k, 1) for k in full}}


def _case_args(case: Any, matrix_dtypes: Any, seed: int) -> tuple[object, ...]:
    import torch

    dtype = getattr(torch, case.dtype)
    dtypes = tuple(matrix_dtypes or [case.dtype])
    found = next((c for c in cases_for(case.op, dtypes) if c.id == case.case), None)
    if found is None:
        raise LookupError(f"kernel_parity has no case {case.op}/{case.case}")
    fp8 = dtype if case.op in FP8_OPS else None
    act = torch.bfloat16 if case.op in FP8_OPS else dtype
    return tuple(found.args(act, fp8, "cpu", int(seed)))
