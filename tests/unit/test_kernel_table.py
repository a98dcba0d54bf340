"""``harness kernels``'s table on the three captured hosts (tests/data/probe): the known
failures that hold on each, with their signatures and the engine's own fallback, for the
calls the kernel_parity suite's hook really makes. The registry's walk is fixed here to
what the vllm-cpu lane's run chose (its provider first): the walk itself is the real
registry's in tests/integration/test_kernels_explain.py, against a real run folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.matrix import load_matrix
from harness.matrix.known_failures import entries_for
from harness.platform import probe
from harness.platform.kernel_table import OpRow, notes, render, rows
from harness.platform.suite_hooks import hooks_of
from harness.plugin.profile import Profile

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "probe"
HOSTS = {"zen4": "lscpu-zen4.json", "zen3": "lscpu-zen3.json", "intel": "lscpu-intel-spr.json"}


@dataclass(frozen=True)
class Walked:
    provider: str
    chosen: bool
    reason: str


def first_listed(matrix: Any) -> Any:
    """The walk where the matrix's first provider takes every call (the vllm-cpu run)."""
    def explain(op: str, _dtype: str, _args: Any) -> list[Walked]:
        names = matrix.kernels[op]
        return [Walked(names[0], True, f"priority 1 of {len(names)}"),
                *(Walked(n, False, "not reached") for n in names[1:])]
    return explain


def table(host: str, ops: tuple[str, ...]) -> dict[tuple[str, str], OpRow]:
    pytest.importorskip("torch")
    matrix = load_matrix("vllm-cpu")
    flags = frozenset(probe.parse_lscpu((DATA / HOSTS[host]).read_text())["flags"])
    (hooks,) = hooks_of(matrix, ROOT, "kernel_calls")
    calls = hooks.module.kernel_calls(Profile(matrix=matrix))
    entries = entries_for(matrix, emulate=False, host_flags=flags)
    return {(r.op, r.dtype): r for r in rows(calls, first_listed(matrix), entries, ops)}


def known_words(row: OpRow) -> str:
    return "\n".join(notes(row))


def test_zen4_fp16_linear_is_the_known_failure_and_the_engines_fallback() -> None:
    got = table("zen4", ("linear",))
    fp16 = known_words(got[("linear", "float16")])
    assert "known failure here for vllm (xfail, 3 of 3 cases, on a host CPU without " \
           "avx512_fp16): raises RuntimeError" in fp16
    assert "the engine, when it happens: vLLM 0.32.0's dispatch_cpu_unquantized_gemm" in fp16
    assert "fails on every case here" in "\n".join(render([got[("linear", "float16")]]))
    assert known_words(got[("linear", "bfloat16")]) == ""  # Zen 4 has AVX-512: oneDNN bf16 runs
    assert "CHOSEN" in render([got[("linear", "float32")]])[1]


def test_avx2_host_bf16_linear_fails_too() -> None:
    got = table("zen3", ("linear",))
    assert "without avx512f" in known_words(got[("linear", "bfloat16")])
    assert "without avx512_fp16" in known_words(got[("linear", "float16")])


def test_intel_fp16_linear_runs_and_amx_attention_is_known() -> None:
    got = table("intel", ("linear", "attention_prefill"))
    assert known_words(got[("linear", "float16")]) == ""  # Sapphire Rapids has AVX-512 FP16
    amx = known_words(got[("attention_prefill", "bfloat16")])
    assert "with amx_bf16" in amx, amx
    assert known_words(table("zen4", ("attention_prefill",))[
        ("attention_prefill", "bfloat16")]) == ""


def test_every_listed_op_and_dtype_has_its_engine_call() -> None:
    got = table("zen4", ())
    matrix = load_matrix("vllm-cpu")
    ops = {op for op, _ in got}
    assert ops == set(matrix.kernels), ops ^ set(matrix.kernels)
    assert all(row.families for row in got.values()), [k for k, r in got.items()
                                                       if not r.families]
