"""This suite's standalone scripts (``harness repro --standalone``, through harness_suite.py's
``standalone`` hook): which test ids have one, which ops, and which code of which files each
script takes (harness/repro/standalone_ops.py's ``Extractor`` takes it by ``ast``).

Per op:

- the reference: refengine/ops/reference.py's function of the op's name;
- the engine call: the function the ``vllm`` provider's ``_impls()`` maps the op to
  (refengine/providers/vllm_provider.py, or the module it names there: vllm_paged.py);
- the kernel library's loading: refengine/providers/vllm_library.py's ``load``;
- the comparison: harness/plugin/numerics.py's ``compare`` (its non-finite rules with it);
- which arguments the op writes (compared after its outputs, as the suite does) and
  whether its contract allows NaN / Inf: refengine/ops/spec.py's ``OpSpec`` of the op.

The engine call's code is taken first, so its text is as written. Pure text (no torch here).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from harness.repro.standalone_ops import (
    ROOT,
    Contract,
    ExtractionError,
    Extractor,
    OpCode,
    Symbol,
    module_path,
    parse_module,
)

PARITY = "suites/kernel_parity/test_parity.py::test_parity["
REFERENCE = "refengine/ops/reference.py"
PROVIDER = "refengine/providers/vllm_provider.py"
LIBRARY = "refengine/providers/vllm_library.py"
NUMERICS = "harness/plugin/numerics.py"
SPEC = "refengine/ops/spec.py"
# The ops with a standalone script: the vllm provider's that the case dump can write (the
# attention ops and the fp8 quantizers have none yet).
SCRIPT_OPS = ("rms_norm", "add_rms_norm", "silu_and_mul", "gelu_and_mul", "linear",
              "int8_scaled_gemm", "fused_moe")
# Which dimension of which argument each shrinkable size is: (argument, dim, size name).
# Widths of the norm / activation ops step by 8 (vLLM's VEC_ELEM_NUM; torch's own too).
AXES: dict[str, tuple[tuple[int, int, str], ...]] = {
    "rms_norm": ((0, 0, "rows"), (0, -1, "width"), (1, 0, "width")),
    "add_rms_norm": ((0, 0, "rows"), (0, -1, "width"), (1, 0, "rows"), (1, -1, "width"),
                     (2, 0, "width")),
    "silu_and_mul": ((0, 0, "rows"), (0, -1, "width2")),
    "gelu_and_mul": ((0, 0, "rows"), (0, -1, "width2")),
    "linear": ((0, 0, "rows"), (0, -1, "k"), (1, 0, "n"), (1, 1, "k"), (2, 0, "n")),
    "int8_scaled_gemm": ((0, 0, "rows"), (0, -1, "k"), (1, 0, "rows"), (2, 0, "n"),
                         (2, 1, "k"), (3, 0, "n"), (4, 0, "n")),
    "fused_moe": ((0, 0, "rows"), (1, 0, "rows"), (1, -1, "experts"), (2, 0, "experts"),
                  (3, 0, "experts")),
}
STEP = {"width": 8, "width2": 16}


class NoScript(ValueError):
    """A case of this suite without a standalone script (harness: exit 2, one line)."""


@dataclass(frozen=True)
class CaseId:
    op: str
    case: str
    dtype: str
    provider: str
    device: str

    @property
    def name(self) -> str:
        return f"test_parity[{self.op}-{self.case}-{self.dtype}-{self.provider}-{self.device}]"

    @property
    def test_id(self) -> str:
        return PARITY + self.name.removeprefix("test_parity[")


def parse_test_id(test_id: str) -> CaseId | None:
    """``...test_parity[rms_norm-x-strided-float32-vllm-cpu]`` -> its op, case, dtype...;
    None for another test's id; NoScript for a parity case without a script."""
    match = re.search(r"test_parity\.py::test_parity\[([^\]]+)\]$", test_id)
    if match is None:
        return None
    parts = match.group(1).split("-")
    op = next((name for name in sorted(SCRIPT_OPS, key=len, reverse=True)
               if match.group(1).startswith(name + "-")), None)
    if op is None or len(parts) < 5:
        known = ", ".join(sorted(SCRIPT_OPS))
        raise NoScript(f"no standalone template for {match.group(1)!r} (ops with one: "
                       f"{known})")
    dtype, provider, device = parts[-3:]
    case = match.group(1)[len(op) + 1:-len(f"-{dtype}-{provider}-{device}")]
    if provider != "vllm" or device != "cpu":
        raise NoScript(f"{provider} on {device}: only the vllm provider's cases (on the "
                       "cpu) have a standalone template")
    return CaseId(op=op, case=case, dtype=dtype, provider=provider, device=device)


def engine_function(root: Path, op: str) -> Symbol:
    """Where the vllm provider's ``_impls()`` says ``op``'s call is: (module, function)."""
    provider = parse_module(root, PROVIDER)
    impls = provider.defs.get("_impls")
    if not isinstance(impls, ast.FunctionDef):
        raise ExtractionError(f"{PROVIDER} has no _impls()")
    local: dict[str, str] = {}
    for sub in ast.walk(impls):
        if isinstance(sub, ast.ImportFrom) and sub.module:
            for alias in sub.names:
                found = module_path(root, f"{sub.module}.{alias.name}")
                if found:
                    local[alias.asname or alias.name] = found
    table = next((s.value for s in impls.body if isinstance(s, ast.Return)), None)
    if not isinstance(table, ast.Dict):
        raise ExtractionError(f"{PROVIDER}: _impls() returns no dict literal")
    for key, value in zip(table.keys, table.values, strict=True):
        if not (isinstance(key, ast.Constant) and key.value == op):
            continue
        if isinstance(value, ast.Name):
            return (PROVIDER, value.id)
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
                and value.value.id in local:
            return (local[value.value.id], value.attr)
        raise ExtractionError(f"{PROVIDER}: _impls()[{op!r}] is not a function's name")
    raise ExtractionError(f"{PROVIDER}: _impls() has no {op!r}")


def contract(root: Path, op: str) -> Contract:
    tree = ast.parse((root / SPEC).read_text(encoding="utf-8"))
    for sub in ast.walk(tree):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) \
                and sub.func.id == "OpSpec":
            words = {k.arg: k.value for k in sub.keywords if k.arg}
            name = words.get("name")
            if isinstance(name, ast.Constant) and name.value == op:
                params = words.get("params")
                mutates = words.get("mutates")
                nonfinite = words.get("nonfinite")
                return Contract(
                    tuple(str(p) for p in ast.literal_eval(params)) if params else (),
                    tuple(str(m) for m in ast.literal_eval(mutates)) if mutates else (),
                    bool(ast.literal_eval(nonfinite)) if nonfinite else False)
    raise ExtractionError(f"{SPEC} has no OpSpec(name={op!r})")


def op_code(op: str, *, root: Path = ROOT, reserved: frozenset[str] = frozenset()) -> OpCode:
    """Everything ``op``'s script takes from the project, read from the files under ``root``."""
    if op not in SCRIPT_OPS:
        raise ExtractionError(f"no standalone script for {op}")
    extractor = Extractor(root, reserved)
    engine_from = engine_function(root, op)
    engine = extractor.take(*engine_from)  # first: its code keeps its names
    load = extractor.take(LIBRARY, "load")
    reference = extractor.take(REFERENCE, op)
    compare = extractor.take(NUMERICS, "compare")
    return OpCode(extractor.pieces(), list(extractor.imports), reference, engine, compare,
                  load, contract(root, op), engine_from, reference_from=REFERENCE,
                  load_from=LIBRARY, compare_from=NUMERICS, contract_from=SPEC)
