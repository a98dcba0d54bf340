"""The thread count refengine's kernels run with is the one harness budgeted: an engine
that sets its own (a torch.set_num_threads at import) slows every kernel without a wrong
result (harness/plugin/speed.py threads_problem)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from engine_support import too_old

from harness.plugin.speed import budgeted_threads, threads_problem


@pytest.mark.tier("smoke")
def test_engine_runs_with_the_budgeted_threads(platform: Any, record_property: Any) -> None:
    if too_old():
        pytest.skip(too_old())
    budget = budgeted_threads(os.environ)
    if budget is None:
        pytest.skip("harness budgeted no thread count here (the user's OMP_NUM_THREADS, or "
                    "HARNESS_THREAD_BUDGET=off)")
    import torch

    from refengine.providers import get_provider, module_table

    for name in module_table():  # every provider loaded, as the parity tests load them
        get_provider(name, platform.device)
    found = torch.get_num_threads()
    record_property("engine_threads", found)
    record_property("budget_threads", budget)
    problem = threads_problem("refengine", found, budget)
    assert problem is None, problem
