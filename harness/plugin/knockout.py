"""An op knock-out (issue 50): the engine's ops named in ``HARNESS_KNOCK_OUT`` raise, so a
run shows which tests truly depend on each (they fail).

    HARNESS_KNOCK_OUT=_C::rms_norm,_C::onednn_mm harness run --matrix vllm-cpu

The op record (plugin/ops.py) sees the calls that pass torch's Python ``OpOverloadPacket``
and ``OpOverload``; a knock-out must not go through that wrapper, or it would only confirm
the record. It replaces the op's kernel in torch's dispatcher instead: a
``torch.library.Library(namespace, "IMPL")``, kept alive for the process (dropping it would
unregister its kernels), registers a raiser for each overload of the op on each dispatch key
that has a kernel for it (:data:`KEYS`: vLLM registers most ops with ``ops.impl(name,
torch::kCPU, &fn)``, a CPU kernel, and some with ``ops.def(schema, &fn)``, a
CompositeImplicitAutograd one, to which the Autograd keys route directly). So a call from
Python (``torch.ops._C.rms_norm(...)``, ``.default(...)``), from torch.compile'd code and
from C++ through the dispatcher all meet the raiser: ``RuntimeError: harness knock-out:
_C::rms_norm is knocked out (HARNESS_KNOCK_OUT)``. torch's warning that a kernel is being
overridden is silenced: overriding is the point.

An op can be replaced only once the library that defines it is loaded, which an engine does
lazily (vLLM's ``vllm._C`` when its platform imports its kernels, often inside a test). So
the pending knock-outs are tried when pytest configures and when its session starts; after
each module is made and run (a ``sys.meta_path`` finder that finds nothing itself: where a
later finder found a module that a standard file loader runs, a source, bytecode or
extension module, that loader's ``create_module`` and ``exec_module`` are wrapped on its own
instance, so the module's ``__loader__`` keeps its type); after ``torch.ops.load_library``
(how refengine loads vLLM's library); and before each test's setup (a library loaded by
other means). Once applied, an op stays knocked out for the process. An op still not loaded
when the session ends gets one line on stderr (under xdist from the controller: an op no
worker loaded, as a worker's stderr is not shown); a name without ``::`` is a usage error.

Each test's teardown report carries ``knocked_out`` (the ops knocked out when it ended,
comma-separated) and ``knock_out_hits`` (how often each op's raiser was called during the
test, results/op_record.py's format), so a bench can tell a knock-out that never fired
(bench/knockout_runs.py). Without the variable, or with it empty, nothing here runs and
torch is never imported; xdist's controller, which runs no test, knocks out nothing.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import pytest

from harness.plugin.teardown import OnTeardown
from harness.results import op_record

SWITCH = "HARNESS_KNOCK_OUT"  # comma-separated namespace::op names
PROPERTY = "knocked_out"
HITS_PROPERTY = "knock_out_hits"
WORKER_KEY = "harness_knock_out_unloaded"  # a worker's ops never loaded, for the controller
# The dispatch keys whose kernel is replaced where the op has one: the backend kernel and
# the composite ones (a catch-all ``def(schema, &fn)`` is CompositeImplicitAutograd).
KEYS = ("CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd")
_NAME = re.compile(r"[A-Za-z_]\w*::[A-Za-z_]\w*\Z", re.ASCII)
_OVERRIDE_WARNING = r"(?s).*overriding a previously registered kernel"
_FILE_LOADERS = (importlib.machinery.SourceFileLoader,
                 importlib.machinery.SourcelessFileLoader,
                 importlib.machinery.ExtensionFileLoader)

_LIBRARIES: dict[str, Any] = {}  # namespace -> its IMPL Library: alive as long as the process
_PENDING: list[str] = []  # named, not yet loaded (or with no kernel to replace yet)
_APPLIED: dict[str, tuple[str, ...]] = {}  # op -> "overload/key" of each kernel replaced
_HITS: Counter[str] = Counter()  # op -> raiser calls since the test started
_busy = False
_load_hooked = False


def names(text: str | None) -> tuple[str, ...]:
    """The ops ``text`` names (the variable's value), in order, once each; a ValueError
    naming the variable and the first malformed name."""
    found: list[str] = []
    for word in (text or "").split(","):
        name = word.strip()
        if not name:
            continue
        if not _NAME.match(name):
            raise ValueError(f"{SWITCH}: {name!r} is not a namespace::op name "
                             "(e.g. _C::rms_norm)")
        if name not in found:
            found.append(name)
    return tuple(found)


def knocked_out() -> tuple[str, ...]:
    """The ops knocked out in this process so far."""
    return tuple(sorted(_APPLIED))


def _torch() -> Any | None:
    """torch where it is imported whole (not while its own modules run), else None: the
    knock-out never imports it."""
    torch = sys.modules.get("torch")
    if torch is None or getattr(getattr(torch, "__spec__", None), "_initializing", False):
        return None
    return torch if "torch.library" in sys.modules else None


def _raiser(qualname: str) -> Callable[..., Any]:
    message = f"harness knock-out: {qualname} is knocked out ({SWITCH})"

    def knocked_out_kernel(*args: Any, **kwargs: Any) -> Any:
        _HITS[qualname] += 1
        raise RuntimeError(message)

    return knocked_out_kernel


def _kernels(torch: Any, qualname: str) -> list[tuple[str, str]]:
    """(the overload's name in its namespace, dispatch key) of each kernel to replace; none
    where the op is not defined (yet) or has no kernel on :data:`KEYS`."""
    space, op = qualname.split("::")
    found = []
    for schema in torch._C._jit_get_schemas_for_operator(qualname):
        name = f"{op}.{schema.overload_name}" if schema.overload_name else op
        found += [(name, key) for key in KEYS
                  if torch._C._dispatch_has_kernel_for_dispatch_key(f"{space}::{name}", key)]
    return found


def _knock_out(torch: Any, qualname: str) -> bool:
    """Replace every kernel of ``qualname`` by its raiser; whether it had any."""
    kernels = _kernels(torch, qualname)
    if not kernels:
        return False
    space = qualname.partition("::")[0]
    if space not in _LIBRARIES:
        _LIBRARIES[space] = torch.library.Library(space, "IMPL")
    raiser = _raiser(qualname)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_OVERRIDE_WARNING)
        for name, key in kernels:
            _LIBRARIES[space].impl(name, raiser, key)
    _APPLIED[qualname] = tuple(f"{name}/{key}" for name, key in kernels)
    return True


def apply_pending() -> None:
    """Knock out each pending op that is loaded by now (once torch is imported)."""
    global _busy
    if not _PENDING or _busy:
        return
    torch = _torch()
    if torch is None:
        return
    _busy = True  # an import while kernels are replaced must not start it again
    try:
        _retry_after_load_library(torch)
        for qualname in list(_PENDING):
            if _knock_out(torch, qualname):
                _PENDING.remove(qualname)
    finally:
        _busy = False
    if not _PENDING:
        _FINDER.uninstall()


class _AfterImport:
    """A ``sys.meta_path`` finder that finds nothing itself: it asks the finders after it
    and, where one found a module a standard file loader runs, wraps that loader's
    ``exec_module`` (the loader is the spec's own instance) so that the pending knock-outs
    are tried once the module has run. Other loaders are left alone (their modules are
    caught before the next test's setup)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not _PENDING or self not in sys.meta_path:
            return None
        for finder in sys.meta_path[sys.meta_path.index(self) + 1:]:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if type(spec.loader) in _FILE_LOADERS:
                    _retry_after(spec.loader)
                return spec  # type: ignore[no-any-return]
        return None

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def _retry_after(loader: Any) -> None:
    """Pending knock-outs tried once ``loader`` made its module (an extension module's
    library registers its ops when it is opened, even where its init function is then
    missing, as with vLLM's ``_C_AVX512``) and once it ran it, each also where it raised."""
    create, run = loader.create_module, loader.exec_module

    def create_module(spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        try:
            return create(spec)  # type: ignore[no-any-return]
        finally:
            apply_pending()

    def exec_module(module: ModuleType) -> None:
        try:
            run(module)
        finally:
            apply_pending()

    loader.create_module, loader.exec_module = create_module, exec_module


def _retry_after_load_library(torch: Any) -> None:
    """``torch.ops.load_library`` (how refengine loads vLLM's library, no import) followed
    by the pending knock-outs; once."""
    global _load_hooked
    if _load_hooked:
        return
    _load_hooked = True
    load = torch.ops.load_library

    def load_library(path: str) -> None:
        try:
            load(path)
        finally:
            apply_pending()

    torch.ops.load_library = load_library


_FINDER = _AfterImport()


class KnockOut(OnTeardown):
    """In a process that runs tests: the knock-outs tried at each hook where an op may have
    loaded since; each test's properties; the ops never loaded, when the session ends."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        apply_pending()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        _HITS.clear()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        apply_pending()

    def teardown(self, item: pytest.Item, report: pytest.TestReport) -> None:
        if _APPLIED:
            report.user_properties.append((PROPERTY, ",".join(knocked_out())))
        hits = op_record.render(_HITS)
        if hits:
            report.user_properties.append((HITS_PROPERTY, hits))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        apply_pending()
        _FINDER.uninstall()
        worker = getattr(session.config, "workeroutput", None)
        if worker is not None:  # an xdist worker's stderr is not shown: the controller's
            worker[WORKER_KEY] = json.dumps(_unloaded())

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if not hasattr(config, "workeroutput"):  # once pytest shows stderr again
            _say_unloaded(_unloaded(), "in this process")


class KnockOutController:
    """xdist's controller: the ops that no worker loaded, once its workers are done."""

    def __init__(self) -> None:
        self.workers = 0
        self.unloaded: dict[str, str] | None = None  # op -> why, in every worker so far

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        text = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        try:
            found = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            found = None
        if not isinstance(found, dict):
            return
        self.workers += 1
        self.unloaded = {op: str(why) for op, why in found.items()
                         if self.unloaded is None or op in self.unloaded}

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.unloaded:
            _say_unloaded(self.unloaded, f"in any of the {self.workers} worker processes")


def _unloaded() -> dict[str, str]:
    """Each op still pending -> why: never loaded, or loaded with no kernel to replace."""
    torch = _torch()
    return {op: ("has no CPU or composite kernel to knock out"
                 if torch is not None and torch._C._jit_get_schemas_for_operator(op)
                 else "was never loaded") for op in _PENDING}


def _say_unloaded(unloaded: dict[str, str], where: str) -> None:
    for op, why in unloaded.items():
        print(f"harness knock-out: {op} {why} {where}", file=sys.stderr)


def register(config: pytest.Config) -> None:
    """Knock out the ops ``HARNESS_KNOCK_OUT`` names, where this process runs tests; a
    malformed name is a usage error. Without the variable, nothing."""
    text = os.environ.get(SWITCH, "")
    if not text.strip():
        return
    try:
        ops = names(text)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    if not ops:
        return
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        # xdist's controller runs no test: it knocks out nothing, and says what no worker
        # could
        config.pluginmanager.register(KnockOutController(), "harness-knock-out")
        return
    _PENDING.extend(op for op in ops if op not in _PENDING and op not in _APPLIED)
    if _PENDING:
        _FINDER.install()
        apply_pending()
    config.pluginmanager.register(KnockOut(), "harness-knock-out")
