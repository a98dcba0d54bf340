"""The all-pairs generator, and the parity cases generated with it from the op domains."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

from refengine.ops.allpairs import all_pairs, uncovered
from refengine.ops.domains import ALLOWED, DOMAINS
from refengine.ops.spec import OP_NAMES

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "suites" / "kernel_parity"))
from parity_cases import FINDINGS, FP8_OPS, cases_for, values_of

CPU_DTYPES = ("float32", "bfloat16", "float16")
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")


def test_every_pair_is_covered_with_far_fewer_rows_than_the_product() -> None:
    domains = {f"a{i}": ("x", "y") for i in range(5)} | {"dtype": CPU_DTYPES}
    rows = all_pairs(domains)
    assert uncovered(domains, rows) == []
    assert len(rows) <= 8 < 2 ** 5 * 3
    assert all_pairs(domains) == rows  # deterministic: ids are built from the rows


def test_a_row_that_drops_a_pair_is_seen() -> None:
    domains = {"a": ("x", "y"), "b": ("p", "q"), "c": ("u", "v")}
    rows = all_pairs(domains)
    for dropped in range(len(rows)):
        rest = rows[:dropped] + rows[dropped + 1:]
        assert uncovered(domains, rest), "a greedy pick that covered nothing new"


def test_covered_rows_and_disallowed_combinations_are_not_generated() -> None:
    domains = {"mode": ("block", "row"), "width": ("one", "multi"), "rank": ("2d", "3d")}

    def allowed(v: dict[str, str] | object) -> bool:
        assert isinstance(v, dict)
        return not (v["mode"] == "block" and v["width"] == "multi")

    kept = [{"mode": "row", "width": "multi", "rank": "2d"}]
    rows = all_pairs(domains, allowed, kept)
    assert all(allowed(r) for r in rows)
    assert kept[0] not in rows
    assert uncovered(domains, [*rows, *kept], allowed) == []


def test_one_argument_covers_each_value() -> None:
    assert all_pairs({"top_k": ("1", "several")}) == [{"top_k": "1"}, {"top_k": "several"}]


@pytest.mark.parametrize("op", OP_NAMES)
def test_the_generated_cases_cover_every_pair_of_every_op(op: str) -> None:
    dtypes = FP8_DTYPES if op in FP8_OPS else CPU_DTYPES
    cases = cases_for(op, dtypes)
    rows = [{**values_of(case), "dtype": d} for case in cases for d in case.dtypes or dtypes]
    assert uncovered({**DOMAINS[op], "dtype": dtypes}, rows, ALLOWED.get(op)) == []
    assert len({case.id for case in cases}) == len(cases)


@pytest.mark.parametrize("op", OP_NAMES)
def test_a_generated_case_builds_the_values_its_id_names(op: str) -> None:
    """Each generated case is built from one row; classifying its call gives the row back
    (so an id never claims a value the tensors do not have), for each size variant."""
    from parity_cases import REALIZE, Case, case_id

    names = list(DOMAINS[op])
    for n, combo in enumerate(itertools.product(*(DOMAINS[op][a] for a in names))):
        row = dict(zip(names, combo, strict=True))
        if op in ALLOWED and not ALLOWED[op](row):
            continue
        build, layout = REALIZE[op](row, n % 4)
        case = Case(op, case_id(row), build, layout)
        assert values_of(case) == row, case.id


def test_findings_run_on_every_dtype_and_come_first() -> None:
    for op in OP_NAMES:
        kept = [c for c in FINDINGS if c.op == op]
        assert all(c.dtypes is None for c in kept)
        assert list(cases_for(op, CPU_DTYPES)[:len(kept)]) == kept
