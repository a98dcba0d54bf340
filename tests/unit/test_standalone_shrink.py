"""--standalone's pure parts: the case id, the shrinking search, the failure's sameness."""

from __future__ import annotations

import itertools
import sys

import pytest
from suite_modules import suite_module

from harness.repro.standalone_render import FRAME_NAMES, Script, render
from harness.repro.standalone_shrink import MAX_TRIALS, minimize
from harness.results.fingerprint import same_failure

ID = "suites/kernel_parity/test_parity.py::test_parity[{}]"
# the kernel_parity suite's side of its standalone hook
_code = suite_module("kernel_parity", "parity_standalone")
parse_test_id, op_code = _code.parse_test_id, _code.op_code


def test_a_case_id_names_op_case_dtype() -> None:
    case = parse_test_id(ID.format("add_rms_norm-eps-small-strided-2d-bfloat16-vllm-cpu"))
    assert (case.op, case.case, case.dtype) == ("add_rms_norm", "eps-small-strided-2d",
                                                "bfloat16")
    assert parse_test_id(ID.format("rms_norm-x-strided-float32-vllm-cpu")).op == "rms_norm"


@pytest.mark.parametrize("test_id, says", [
    (ID.format("attention_prefill-qkv-strided-float32-vllm-cpu"), "no standalone template"),
    (ID.format("rms_norm-x-strided-float32-native-cpu"), "only the vllm provider"),
])
def test_a_case_without_a_template_is_one_line(test_id: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):  # the hook's refusal: exit 2, one line
        parse_test_id(test_id)


def test_another_suites_test_is_not_the_parity_hooks() -> None:
    assert parse_test_id("tests/test_x.py::test_y") is None


def test_minimize_finds_the_smallest_failing_sizes_in_steps() -> None:
    asked: list[dict[str, int]] = []

    def fails(sizes: dict[str, int]) -> bool:  # the bug needs two rows; any width shows it
        asked.append(sizes)
        return sizes["rows"] >= 2 and sizes["width"] >= 8

    got = minimize({"rows": 9, "width": 96}, {"width": 8}, fails, budget_s=60)
    assert got.sizes == {"rows": 2, "width": 8}
    assert got.summary() == "rows 9 -> 2, width 96 -> 8"
    assert all(s["width"] % 8 == 0 for s in asked)
    first = list(asked)
    asked.clear()
    minimize({"rows": 9, "width": 96}, {"width": 8}, fails, budget_s=60)
    assert asked == first  # the same trials, in the same order


def test_minimize_keeps_an_odd_size_and_stops_at_its_bounds() -> None:
    got = minimize({"rows": 7, "width": 130}, {"width": 8}, lambda s: True, budget_s=60)
    assert got.sizes == {"rows": 1, "width": 130}
    many = minimize({"rows": 10**9}, {}, lambda s: False, budget_s=60)
    assert many.trials == MAX_TRIALS and "trials" in many.stopped
    ticks = itertools.count(0, 10.0)
    late = minimize({"rows": 64}, {}, lambda s: True, budget_s=15, clock=lambda: next(ticks))
    assert late.trials < 6 and "budget" in late.stopped


def test_the_same_failure() -> None:
    boom = {"kind": "exception", "type": "RuntimeError", "message": "width 96 % 8"}
    assert same_failure(boom, {**boom, "message": "width 16 % 8"})
    assert not same_failure(boom, {**boom, "type": "ValueError"})
    assert not same_failure(boom, {"kind": "mismatch", "headroom": 9.0})
    assert same_failure({"kind": "signal", "signal": "SIGSEGV"},
                        {"kind": "signal", "signal": "SIGSEGV"})
    assert not same_failure({"kind": "signal", "signal": "SIGSEGV"},
                            {"kind": "signal", "signal": "SIGABRT"})
    # the engine script's finding (its own kind): the kind alone, as a mismatch's
    assert same_failure({"kind": "tokens_differ"}, {"kind": "tokens_differ", "at": 3})
    assert not same_failure({"kind": "tokens_differ"}, {"kind": "mismatch"})
    assert not same_failure({}, {})


def test_the_scripts_carry_the_one_same_failure_rule() -> None:
    """The script frame's verdict asks the same function --minimize does (its source, not a
    copy): two copies disagreed on an engine script's finding."""
    import inspect

    from harness.repro import standalone_render
    from harness.results import fingerprint

    frame = standalone_render.VERDICT
    assert inspect.getsource(fingerprint.same_failure) in frame
    assert "same = same_failure(EXPECTED, seen)" in frame and "found_kind" not in frame
    namespace: dict[str, object] = {}
    exec("import re\n" + fingerprint.mask_source(), namespace)  # our own source
    carried = namespace["same_failure"]
    assert callable(carried)
    for expected, seen in [({"kind": "tokens_differ"}, {"kind": "tokens_differ"}),
                           ({"kind": "exception", "type": "E", "message": "a 1"},
                            {"kind": "exception", "type": "E", "message": "a 2"}),
                           ({"kind": "signal", "signal": "SIGILL"}, {"kind": "mismatch"})]:
        assert carried(expected, seen) == same_failure(expected, seen)


def test_the_script_needs_no_harness() -> None:
    text = render(Script(test_id="t", op="rms_norm", args=[], tolerance={"atol": 1.0, "rtol": 0.0},
                         env={"ONEDNN_MAX_CPU_ISA": "AVX2"}, expected={"kind": "mismatch"},
                         origin="matrix m"), op_code("rms_norm", reserved=FRAME_NAMES))
    compile(text, "repro.py", "exec")
    imported = {line.split()[1].split(".")[0] for line in text.splitlines()
                if line.startswith(("import ", "from "))}
    # the standard library's modules and torch: no harness, no refengine
    assert imported - {"__future__"} <= set(sys.stdlib_module_names) | {"torch", "numpy"}
    assert {"harness", "refengine"}.isdisjoint(imported) and "torch" in imported
    assert "'ONEDNN_MAX_CPU_ISA': 'AVX2'" in text or '"ONEDNN_MAX_CPU_ISA": "AVX2"' in text


@pytest.mark.parametrize(("found", "shrunk", "same"), [
    # another value of the same failure: numbers as tokens of their own are masked
    ("Unsupported CPU attention configuration: head_dim=32 isa=0",
     "Unsupported CPU attention configuration: head_dim=16 isa=0", True),
    ("shape '[9, 96]' is invalid for input of size 864", "shape '[2, 8]' is invalid for "
     "input of size 16", True),
    # another failure: the digits are part of a word (a dtype, a library, an ISA)
    ("expected float16, got float32", "expected float32, got float16", False),
    ("_C_AVX2 has no cpu_attention_with_kv_cache", "_C_AVX512 has no "
     "cpu_attention_with_kv_cache", False),
    ("could not create a primitive descriptor for the matmul primitive",
     "could not create a primitive descriptor for the reorder primitive", False),
])
def test_a_shrunk_case_that_fails_another_way_is_not_the_finding(found: str, shrunk: str,
                                                                same: bool) -> None:
    """--minimize keeps a smaller case only while it fails the same way, judged by the one
    masker (results/fingerprint.py): `\\d+` masked inside words too, and took an error about
    another dtype or library for the finding."""
    expected = {"kind": "exception", "type": "RuntimeError", "message": found}
    assert same_failure(expected, {**expected, "message": shrunk}) is same


def test_the_script_judges_sameness_with_the_same_masker() -> None:
    from harness.results import fingerprint

    text = render(Script(test_id="t", op="rms_norm", args=[], tolerance={"atol": 1.0, "rtol": 0.0},
                         env={}, expected={"kind": "mismatch"}, origin="matrix m"),
                  op_code("rms_norm", reserved=FRAME_NAMES))
    space: dict[str, object] = {"re": __import__("re")}
    exec(compile(fingerprint.mask_source(), "mask", "exec"), space)
    assert fingerprint.mask_source() in text
    message = "expected float16 at 0x7f3a, got 12 and 1.5e-3"
    assert space["mask"](message) == fingerprint.mask(message)  # type: ignore[operator]


@pytest.mark.parametrize("threshold", range(1, 10))
def test_minimize_finds_every_threshold_exactly_and_counts_each_trial(threshold: int) -> None:
    asked: list[int] = []

    def fails(sizes: dict[str, int]) -> bool:
        asked.append(sizes["rows"])
        return sizes["rows"] >= threshold

    got = minimize({"rows": 9}, {"rows": 0}, fails, budget_s=60)  # a step of 0 is one
    assert got.sizes == {"rows": threshold}
    assert got.trials == len(asked) and got.stopped == ""


def test_the_budget_stops_at_the_first_trial_past_it_not_at_it() -> None:
    ticks = itertools.count(0, 5.0)  # the deadline at 10: trials at 5 and 10, not at 15
    got = minimize({"rows": 64}, {}, lambda s: True, budget_s=10, clock=lambda: next(ticks))
    assert got.trials == 2 and got.stopped == "the 10 s budget"
    assert got.summary() == "rows 64 -> 64 (stopped early: the 10 s budget)"


def test_a_mismatch_is_the_same_failure_whatever_its_size_and_a_kind_by_its_kind_alone(
) -> None:
    assert same_failure({"kind": "mismatch", "headroom": 2.0},
                        {"kind": "mismatch", "headroom": 9.0})
    # the engine script's finding: its kind alone, as its script judges it (one rule)
    assert same_failure({"kind": "tokens_differ"}, {"kind": "tokens_differ"})
    assert not same_failure({"kind": "tokens_differ"}, {"kind": "no_tokens"})
