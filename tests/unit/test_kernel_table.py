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


# -- the table's text and its filters at their edges (what the first mutation run left) ------

def _entry(**kw: Any) -> Any:
    from harness.matrix.known_failures import Entry

    return Entry(pattern="*", action="xfail", reason="r", where="m.yaml:1", expires=None, **kw)


def _row(op: str, families: list[Any], known: list[Any]) -> OpRow:
    return OpRow(op=op, dtype="bfloat16", walk=[Walked("vllm", True, "priority 1 of 2"),
                                                 Walked("torch", False, "not reached")],
                 families=families, known=known)


def test_the_table_s_columns_and_notes_line_up_under_reason() -> None:
    from harness.platform.kernel_table import Family, Known

    short = _row("linear", [Family("vllm", ("a",), ""),
                            Family("torch", ("c1", "c2", "c3", "c4"), "vllm: declines odd K"),
                            Family("native", ("n1", "n2", "n3"), "vllm: x; torch: y")],
                 [Known("vllm", _entry(), 1, 1), Known("torch", _entry(), 1, 4)])
    lines = render([short])
    header = lines[0]
    # an op shorter than 10 characters still gets a 10-wide column
    assert header == "op          dtype            provider            reason"
    column = header.index("reason")
    assert lines[1] == ("linear      bfloat16         vllm       CHOSEN   priority 1 of 2; fails "
                        "on every case here: known failure below")
    assert lines[2] == "linear      bfloat16         torch      -        not reached"
    notes_ = lines[3:]
    assert all(line[:column].strip() == "" and line[column] != " " for line in notes_), notes_
    assert notes_[0][column:] == ("4 of 8 cases go to torch (vllm: declines odd K): c1, c2, c3, "
                                  "...")
    assert notes_[1][column:] == "3 of 8 cases go to native (vllm: x; torch: y): n1, n2, n3"
    assert notes_[2][column:].startswith("known failure here for vllm (xfail, 1 of 1 cases)")
    assert notes_[3][column:].startswith("known failure here for torch (xfail, 1 of 4 cases)")
    # a longer op widens the column, and the notes follow it
    wide = render([_row("attention_prefill", [Family("torch", ("x",), "w")], [])])
    assert wide[0].index("reason") == len("attention_prefill") + 2 + 17 + 11 + 9
    assert wide[-1].index("1 of 1 cases") == wide[0].index("reason")


def test_a_known_failure_on_some_cases_only_does_not_say_every_case() -> None:
    from harness.platform.kernel_table import Known

    row = _row("rms_norm", [], [Known("vllm", _entry(), 2, 3)])
    assert "fails on every case here" not in render([row])[1]


def test_a_signature_in_words() -> None:
    from harness.platform.kernel_table import signature

    assert signature(_entry()) == "any failure"
    assert signature(_entry(expect={"match": "tokens differ"})) == "matching 'tokens differ'"
    assert signature(_entry(expect={"raises": "RuntimeError", "headroom": {"min": 2}})) == \
        "raises RuntimeError, headroom 2..-"


def test_rows_keep_the_ops_and_the_dtype_asked_for() -> None:
    def call(op: str, dtype: str, case: str, engine: bool) -> Any:
        return {"op": op, "dtype": dtype, "case": case, "engine": engine,
                "args": lambda: (), "test_id": ""}

    def explain(op: str, dtype: str, args: Any) -> list[Walked]:
        return [Walked("vllm", True, "priority 1 of 2"),
                Walked("torch", False, "not reached"), Walked("native", False, "declined")]

    calls = [call(op, dt, f"{op}-{dt}-{i}", i == 0) for op in ("linear", "rms_norm")
             for dt in ("bfloat16", "float32") for i in range(2)]
    keys = lambda found: [(r.op, r.dtype) for r in found]  # noqa: E731
    assert keys(rows(calls, explain, [])) == [("linear", "bfloat16"), ("linear", "float32"),
                                              ("rms_norm", "bfloat16"), ("rms_norm", "float32")]
    assert keys(rows(calls, explain, [], ops=("rms_norm",))) == [("rms_norm", "bfloat16"),
                                                                 ("rms_norm", "float32")]
    assert keys(rows(calls, explain, [], dtype="float32")) == [("linear", "float32"),
                                                               ("rms_norm", "float32")]
    assert keys(rows(calls, explain, [], ops=("linear",), dtype="float32")) == [
        ("linear", "float32")]
    (row,) = rows(calls, explain, [], ops=("linear",), dtype="bfloat16")
    # the reason chain leaves out the candidates never reached
    assert row.families[0].why == "native: declined"
