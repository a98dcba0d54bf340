"""What this suite offers harness beyond its tests (docs/byo-suite.md, "A suite's hooks").

``kernel_calls``: the calls its tests make, for ``harness kernels`` to explain with the
shapes the suite really runs: the engine-shaped call of each op (the one test_selection.py
judges the provider table on) and every parity case, with the node id each case's test of
a provider has. harness imports this module from the suite's folder, in the matrix's
environment; it never reads the suite's other modules.
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
