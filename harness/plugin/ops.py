"""Each test's op record (results/op_record.py): which of the engine's kernel ops it called.

Every call of an op through ``torch.ops`` passes one of two Python methods, whatever its
path: ``OpOverloadPacket.__call__`` (``torch.ops._C.rms_norm(...)``, vLLM's wrapper modules
``_custom_ops`` and ``_cpu_ops``, a handle a module took at import) and
``OpOverload.__call__`` (``torch.ops._C.rms_norm.default(...)``, the code torch.compile
writes, an op the engine registers in Python such as ``vllm::...``). Once torch is
imported in a test process, the plugin wraps both, once, and counts each call by
``namespace::op``, torch's own namespaces (``aten``, ``prims``, ...) left out. refengine's
registry counts the provider and op it dispatched (refengine/ops/record.py), read here too.

Counts start when a test starts and are read when it is torn down (its fixtures' calls are
its own); the test's teardown report carries them as its ``ops`` property, which the
sidecar, JUnit and the history keep, and a crash salvages, as any property. A call that
never leaves C++ (a kernel calling another op through the dispatcher) is not seen:
tests/integration/test_op_record.py holds the record against torch's profiler (every op
the dispatcher ran) on a sample of vLLM's own tests.

``HARNESS_OP_RECORD=off`` runs without it (bench/op_record.py compares the two).
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from harness.results import op_record

if TYPE_CHECKING:
    from pluggy import Result

SWITCH = "HARNESS_OP_RECORD"  # "off": no record
# torch's own namespaces: its operators, primitives and passes, not an engine's kernels
TORCH_OWN = frozenset({"aten", "prim", "prims", "profiler", "mkldnn", "quantized",
                       "_quantized", "quantized_decomposed", "inductor", "higher_order",
                       "debugprims", "rngprims", "_inductor_test"})

_CALLS: Counter[str] = Counter()  # "namespace::op" -> calls, since the test started
_installed = False


def enabled() -> bool:
    return os.environ.get(SWITCH, "on").strip().lower() not in ("off", "0", "no", "false")


def install() -> bool:
    """Wrap torch's two op-call methods once, where torch is imported; whether they are."""
    global _installed
    if _installed:
        return True
    torch_ops = sys.modules.get("torch._ops")
    if torch_ops is None:
        return False
    packet, overload = torch_ops.OpOverloadPacket, torch_ops.OpOverload
    packet_call, overload_call = packet.__call__, overload.__call__
    calls, own = _CALLS, TORCH_OWN

    def packet_counted(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        name = self._qualified_op_name
        if name.partition("::")[0] not in own:
            calls[name] += 1
        return packet_call(self, *args, **kwargs)

    def overload_counted(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        if self.namespace not in own:
            calls[f"{self.namespace}::{self._opname}"] += 1
        return overload_call(self, *args, **kwargs)

    packet.__call__ = packet_counted
    overload.__call__ = overload_counted
    _installed = True
    return True


def _refengine_calls() -> Counter[str] | None:
    module = sys.modules.get("refengine.ops.record")  # never imported for a suite without it
    return getattr(module, "CALLS", None)


class OpRecord:
    """In every process that runs tests: each test's op calls on its teardown report."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        install()
        _CALLS.clear()
        dispatched = _refengine_calls()
        if dispatched is not None:
            dispatched.clear()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]
                                  ) -> Generator[None, Result[pytest.TestReport], None]:
        outcome = yield
        if call.when != "teardown":
            return
        counts = Counter(_CALLS)
        dispatched = _refengine_calls()
        if dispatched is not None:
            counts.update(dispatched)
        text = op_record.render(counts)
        if text:
            outcome.get_result().user_properties.append((op_record.PROPERTY, text))
