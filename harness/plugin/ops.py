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

The engine's kernel surface, what the record is held against (:func:`engine_surface`), is
read from the engine itself when a test process ends: every op registered with torch whose
schema was registered outside torch (the dispatcher says where: vLLM's ``_C`` library's
``csrc/cpu/torch_bindings.cpp``, the ``vllm::`` ops its Python registers), each with that
place, and each op of the refengine providers the suite loaded. xdist's workers hand theirs
to the controller (``workeroutput``), which writes the union beside the sidecar
(``junit/<stem>.engine-ops.json``); the run lifts it into the device fingerprint
(``engine_ops``). An op registered through ``torch.library.custom_op`` has torch's own
file as its place and is left out.

``HARNESS_OP_RECORD=off`` runs without it (bench/op_record.py compares the two).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.plugin.teardown import OnTeardown
from harness.results import op_record
from harness.results.layout import engine_ops_for_partial

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


_SITE = re.compile(r"registered at (\S+?:\d+)")
_TORCH_BUILD = ("/torch/csrc/", "/aten/src/", "/caffe2/")
WORKER_KEY = "harness_engine_ops"  # an xdist worker's surface, for the controller


def _short(site: str) -> str:
    """A registration place without the machine's part: from ``site-packages/`` on for a
    module, from ``csrc/`` on for a source file where it has one."""
    for mark, keep in (("site-packages/", False), ("csrc/", True)):
        at = site.find(mark)
        if at >= 0:
            return site[at if keep else at + len(mark):]
    return site


def engine_surface() -> dict[str, str]:
    """The engine's ops in this process -> where each is defined: every op whose schema
    was registered outside torch (checked on one op a namespace: an engine registers its
    namespaces whole), and ``provider/op`` for each op of each refengine provider the
    suite loaded and can run here."""
    surface: dict[str, str] = {}
    torch = sys.modules.get("torch")
    if torch is not None:
        own = str(Path(torch.__file__ or "").parent)

        def site(name: str) -> str | None:
            found = _SITE.search(torch._C._dispatch_dump(name))
            return found.group(1) if found else None

        names = torch._C._dispatch_get_all_op_names()
        first: dict[str, str] = {}
        for name in names:
            first.setdefault(name.partition("::")[0], name)
        engine = set()
        for space, name in first.items():
            where = site(name) if space not in TORCH_OWN else None
            if where and not where.startswith(own) and not any(m in where for m in _TORCH_BUILD):
                engine.add(space)
        for name in names:
            if name.partition("::")[0] in engine:
                surface[name] = _short(site(name) or "")
    surface.update(_provider_surface())
    return surface


def _surface_or_none() -> dict[str, str]:
    """:func:`engine_surface`, or none where reading it fails (a torch without the
    dispatcher's dump, a provider that raises): the surface is a by-product of a suite, never
    a reason for it to fail; the report then shows that run's calls without it."""
    try:
        return engine_surface()
    except Exception as error:  # whatever an engine's code raises
        print(f"harness: the engine's ops were not read: {type(error).__name__}: {error}",
              file=sys.stderr)
        return {}


def _provider_surface() -> dict[str, str]:
    providers, spec = sys.modules.get("refengine.providers"), sys.modules.get("refengine.ops.spec")
    if providers is None or spec is None:
        return {}
    surface = {}
    for (name, module, _device), provider in list(providers._CACHE.items()):
        if not provider.is_available()[0]:
            continue
        for op in spec.OPS:
            if providers.offers(provider, op):
                surface[f"{name}/{op}"] = f"refengine provider {module}"
    return surface


def _refengine_calls() -> Counter[str] | None:
    module = sys.modules.get("refengine.ops.record")  # never imported for a suite without it
    return getattr(module, "CALLS", None)


class OpRecord(OnTeardown):
    """In every process that runs tests: each test's op calls on its teardown report; the
    engine's surface when its tests end (a worker's to the controller, which writes it)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.surface: dict[str, str] = {}

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        self._add(getattr(node, "workeroutput", {}).get(WORKER_KEY))

    def _add(self, text: object) -> None:
        try:
            found = json.loads(text) if isinstance(text, str) else {}
        except ValueError:
            found = {}
        if isinstance(found, Mapping):
            self.surface.update({str(k): str(v) for k, v in found.items()})

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        worker = getattr(self.config, "workeroutput", None)
        if worker is not None:  # an xdist worker: the controller writes the suite's
            worker[WORKER_KEY] = json.dumps(_surface_or_none())
            return
        if not getattr(self.config.option, "numprocesses", None):
            self.surface.update(_surface_or_none())  # the test process itself
        partial = self.config.getoption("--harness-partial")
        if partial and self.surface:
            engine_ops_for_partial(Path(partial)).write_text(
                json.dumps(dict(sorted(self.surface.items())), indent=1) + "\n",
                encoding="utf-8")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        install()
        _CALLS.clear()
        dispatched = _refengine_calls()
        if dispatched is not None:
            dispatched.clear()

    def teardown(self, item: pytest.Item, report: pytest.TestReport) -> None:
        counts = Counter(_CALLS)
        dispatched = _refengine_calls()
        if dispatched is not None:
            counts.update(dispatched)
        text = op_record.render(counts)
        if text:
            report.user_properties.append((op_record.PROPERTY, text))
