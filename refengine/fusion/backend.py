"""A torch.compile backend: the fusion passes, then inductor, with a report of both.

The passes run as inductor's ``post_grad_custom_pre_pass`` (the graph is then
functional aten plus our custom ops). The FX-graph and AOT-autograd caches are off for
these compiles: a cache hit would skip the passes and codegen, and every count would
read 0. The C++/Triton code caches under TORCHINDUCTOR_CACHE_DIR stay on, and they hold
the slow part (the C++ compiler), so a warm run is still fast.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

from refengine.fusion import audit, fused_ops, passes

# "module:attribute" naming a sequence of PassDef that replaces the built-in passes, so a
# test can run the real suite with a changed pass.
PASSES_ENV = "REFENGINE_FUSION_PASSES"


def default_pass_defs() -> tuple[passes.PassDef, ...]:
    spec = os.environ.get(PASSES_ENV, "").strip()
    if not spec:
        return passes.PASS_DEFS
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"{PASSES_ENV}: expected module:attribute, got {spec!r}")
    return tuple(getattr(importlib.import_module(module), attr))


@dataclass
class PassResult:
    matched: int = 0
    status: str = "applied"  # or "not applicable: <reason>"

    @property
    def applicable(self) -> bool:
        return self.status == "applied"


@dataclass
class FusionReport:
    passes: dict[str, PassResult] = field(default_factory=dict)
    unfused: dict[str, int] = field(default_factory=dict)
    kernels: int = 0
    graphs: int = 0  # compiled graphs (more than 1 means a graph break)
    # fused nodes whose arguments are not those of the pattern they replaced (audit.py);
    # a finding, kept out of as_dict() (the expectation files hold counts only)
    arg_mismatches: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "passes": {
                n: (r.matched if r.applicable else r.status) for n, r in self.passes.items()
            },
            "unfused": dict(self.unfused),
            "kernels": self.kernels,
        }


def applicability(defn: passes.PassDef, fp8_dtype: torch.dtype | None) -> str:
    """ "applied" or "not applicable: <reason>" for one pass in this process and platform."""
    if defn.needs_fp8 and fp8_dtype is None:
        return "not applicable: the platform has no fp8 dtype"
    if defn.needs_distributed:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            return "not applicable: no torch.distributed process group"
        if dist.get_world_size() < 2:
            return "not applicable: world size 1"
    provider, why = fused_ops.fused_provider(defn.fused_op)
    if provider is None:
        return f"not applicable: {why}"
    return "applied"


class _Passes(CustomGraphPass):
    def __init__(self, backend: FusionBackend) -> None:
        self.backend = backend

    def __call__(self, graph: torch.fx.Graph) -> None:
        report = self.backend.report
        for defn, matcher in self.backend.matchers:
            result = report.passes.setdefault(defn.name, PassResult())
            status = applicability(defn, self.backend.fp8_dtype)
            if status != "applied":
                result.status = status
                continue
            result.matched += matcher.apply(graph)
        graph.eliminate_dead_code()
        for op, n in passes.count_unfused(graph).items():
            report.unfused[op] = report.unfused.get(op, 0) + n

    def uuid(self) -> str:
        source = "".join(inspect.getsource(m) for m in (passes, fused_ops, audit))
        return hashlib.sha256(source.encode()).hexdigest()


class FusionBackend:
    """``torch.compile(model, backend=FusionBackend(...))``; read ``.report`` afterwards.

    ``pass_defs`` replaces the pass list (a test uses it to run a changed pass).
    """

    def __init__(
        self,
        fp8_dtype: torch.dtype | None = None,
        pass_defs: Sequence[passes.PassDef] | None = None,
        enabled: bool = True,
    ) -> None:
        self.fp8_dtype = fp8_dtype
        defs = default_pass_defs() if pass_defs is None else tuple(pass_defs)
        self.report = FusionReport()
        # Each handler runs under the argument audit, which reports into this backend's report.
        self.matchers = [(d, passes.build(self._audited(d))) for d in defs] if enabled else []

    def _audited(self, defn: passes.PassDef) -> passes.PassDef:
        sink = self.report.arg_mismatches
        return dataclasses.replace(
            defn, handler=audit.audited(defn.name, defn.fused_op, defn.handler, sink)
        )

    def __call__(
        self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
    ) -> Callable[..., Any]:
        import torch._functorch.config as functorch_config
        from torch._inductor import metrics
        from torch._inductor.compile_fx import compile_fx

        before = metrics.generated_kernel_count
        # emulate_precision_casts: inductor otherwise keeps a bf16 sum in fp32 when it
        # inlines it into the next pointwise op, so an unfused graph stops matching eager
        # by more than one op's tolerance; the suite compares with eager, so round as it does.
        patches = {
            "post_grad_custom_pre_pass": _Passes(self),
            "fx_graph_cache": False,
            "emulate_precision_casts": True,
        }
        with functorch_config.patch(enable_autograd_cache=False):
            compiled = compile_fx(gm, list(example_inputs), config_patches=patches)
        self.report.kernels += metrics.generated_kernel_count - before
        self.report.graphs += 1
        if not callable(compiled):  # compile_fx returns code or weights only when asked to
            raise TypeError(f"compile_fx returned {type(compiled).__name__}, not a callable")
        return compiled
