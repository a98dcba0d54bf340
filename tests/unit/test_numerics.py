"""harness.plugin.numerics: the tolerance check every suite's numbers go through."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from harness.plugin.numerics import compare, nonfinite, record_numerics  # noqa: E402

NAN, INF = float("nan"), float("inf")


class Tol:
    def __init__(self, atol: float = 1e-3, rtol: float = 1e-2, bitwise: bool = False,
                 source: str = "") -> None:
        self.atol, self.rtol, self.bitwise, self.source = atol, rtol, bitwise, source


def t(*values: float, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64).to(dtype)


def test_matching_nans_are_a_finding_not_a_pass() -> None:
    # An all-NaN result against an all-NaN reference once read "max abs err 0, ok".
    cmp = compare(t(NAN, NAN), t(NAN, NAN), Tol())
    assert not cmp.ok and cmp.headroom == INF
    assert cmp.detail.startswith("the reference has 2 NaN (a broken case")


def test_a_nan_or_inf_in_the_result_fails_where_the_reference_is_finite() -> None:
    for bad in (NAN, INF, -INF):
        cmp = compare(t(1.0, bad), t(1.0, 2.0), Tol())
        kind = "NaN" if bad != bad else "Inf"
        assert not cmp.ok and cmp.detail.startswith(f"1 {kind} in the result, where the op's")
        assert cmp.max_abs_err == 0.0  # the finite rest is still measured


def test_an_inf_shared_with_the_reference_fails() -> None:
    cmp = compare(t(1.0, INF), t(1.0, INF), Tol())
    assert not cmp.ok and "the reference has 1 Inf" in cmp.detail


def test_fp8_nan_is_seen() -> None:
    fnuz = torch.float8_e4m3fnuz
    got = t(1.0, 300.0).to(fnuz)  # >= 248 casts to NaN on e4m3fnuz
    assert nonfinite(got) == "1 NaN"
    assert not compare(got, t(1.0, 2.0, dtype=fnuz), Tol(0.1, 0.1)).ok


def test_bitwise_equal_nans_fail_too() -> None:
    cmp = compare(t(NAN, 1.0), t(NAN, 1.0), Tol(bitwise=True))
    assert not cmp.ok and cmp.detail.endswith("; bitwise equal")
    assert compare(t(2.0, 1.0), t(2.0, 1.0), Tol(bitwise=True)).ok


def test_where_the_contract_allows_them_they_must_match_in_place_and_kind() -> None:
    assert compare(t(NAN, INF, 1.0), t(NAN, INF, 1.0005), Tol(), nonfinite_ok=True).ok
    for got in (t(INF, NAN, 1.0), t(NAN, -INF, 1.0), t(NAN, 3.0, 1.0)):
        cmp = compare(got, t(NAN, INF, 1.0), Tol(), nonfinite_ok=True)
        assert not cmp.ok and cmp.detail.startswith("NaN / Inf pattern differs")
    # the finite rest is still held to the tolerance
    assert not compare(t(NAN, 1.5), t(NAN, 1.0), Tol(), nonfinite_ok=True).ok


def test_nonfinite_counts() -> None:
    assert nonfinite(t(1.0, 2.0)) == ""
    assert nonfinite(t(NAN, INF, -INF, NAN, 0.0)) == "2 NaN, 2 Inf"
    assert nonfinite(t(NAN, dtype=torch.bfloat16)) == "1 NaN"
    assert nonfinite(torch.tensor([1, 2])) == ""  # integers have none
    assert nonfinite(torch.empty(0)) == ""


def test_tolerance_is_atol_plus_rtol_times_expected() -> None:
    # allowed = 1e-3 + 1e-2 * 10 = 0.101 at 10; 0.1 is inside, 0.102 outside
    f64 = torch.float64
    inside = compare(t(10.1, dtype=f64), t(10.0, dtype=f64), Tol())
    assert inside.ok and inside.headroom == pytest.approx(0.1 / 0.101, rel=1e-6)
    assert inside.max_abs_err == pytest.approx(0.1, rel=1e-6)
    assert inside.max_rel_err == pytest.approx(0.01, rel=1e-6)
    outside = compare(t(10.102, dtype=f64), t(10.0, dtype=f64), Tol())
    assert not outside.ok and outside.headroom > 1.0
    exact = compare(t(1.0 + 1e-3 + 1e-2, dtype=f64), t(1.0, dtype=f64), Tol())
    assert exact.headroom == pytest.approx(1.0, rel=1e-6)


def test_headroom_reports_the_worst_element() -> None:
    cmp = compare(t(1.0, 2.05, 3.0), t(1.0, 2.0, 3.0), Tol())
    assert "worst at flat index 1: got 2.05, expected 2" in cmp.detail
    assert cmp.detail.startswith("max abs err 0.05")


def test_shape_mismatch_and_empty() -> None:
    cmp = compare(torch.zeros(2, 3), torch.zeros(3, 2), Tol())
    assert not cmp.ok and cmp.detail == "shape (2, 3) != expected (3, 2)"
    assert compare(torch.zeros(0), torch.zeros(0), Tol()).ok


def test_bitwise_tells_dtype_and_bits_apart() -> None:
    assert not compare(t(1.0), t(1.0, dtype=torch.float64), Tol(bitwise=True)).ok
    cmp = compare(t(1.0, 2.0), t(1.0, 2.5), Tol(bitwise=True))
    assert not cmp.ok and cmp.max_abs_err == 0.5 and "not bitwise equal (max abs 0.5)" in cmp.detail


def test_record_numerics_records_then_raises() -> None:
    recorded: list[tuple[str, object]] = []

    def record(key: str, value: object) -> None:
        recorded.append((key, value))

    result = record_numerics(t(1.0), t(1.0), Tol(source="cpu/dtype:float32"), record, op="x")
    assert result.ok
    assert dict(recorded) == {"op": "x", "max_abs_err": "0", "max_rel_err": "0", "atol": "0.001",
                              "rtol": "0.01", "headroom": "0",
                              "tolerance_source": "cpu/dtype:float32"}
    recorded.clear()
    with pytest.raises(AssertionError, match=r"^op=y dtype=bf16: out of tolerance: 1 NaN"):
        record_numerics(t(NAN), t(1.0), Tol(bitwise=True), record, op="y", dtype="bf16")
    assert dict(recorded)["atol"] == "bitwise" and dict(recorded)["headroom"] == "inf"
    assert "tolerance_source" not in dict(recorded)
    assert record_numerics(t(NAN), t(NAN), Tol(), record, nonfinite_ok=True).ok


def test_exactly_at_the_limit_passes_and_zero_tolerance_means_equal() -> None:
    at = compare(t(1.5), t(1.0), Tol(atol=0.5, rtol=0.0))
    assert at.ok and at.headroom == 1.0
    exact = compare(t(2.0, 3.0), t(2.0, 3.0), Tol(atol=0.0, rtol=0.0))
    assert exact.ok and exact.headroom == 0.0
    assert not compare(t(2.0, 3.0), t(2.0, 3.0 + 1e-6), Tol(atol=0.0, rtol=0.0)).ok


def test_relative_error_of_small_and_zero_expected_values() -> None:
    assert compare(t(0.6), t(0.5), Tol(0.5, 0.0)).max_rel_err == pytest.approx(0.2)
    assert compare(t(1e-3), t(0.0), Tol(0.5, 0.0)).max_rel_err == pytest.approx(1e9)


def test_empty_results_compare_as_nothing_wrong() -> None:
    want = compare(torch.zeros(0), torch.zeros(0), Tol())
    assert (want.max_abs_err, want.max_rel_err, want.headroom, want.ok) == (0.0, 0.0, 0.0, True)
    bitwise = compare(torch.zeros(0), torch.zeros(0), Tol(bitwise=True))
    assert (bitwise.max_abs_err, bitwise.headroom, bitwise.ok) == (0.0, 0.0, True)


def test_bitwise_headroom_is_zero_or_infinite() -> None:
    assert compare(t(1.0), t(1.0), Tol(bitwise=True)).headroom == 0.0
    assert compare(t(1.0), t(2.0), Tol(bitwise=True)).headroom == INF


def test_a_tolerance_without_a_bitwise_field_is_numeric() -> None:
    class Plain:  # what a suite's own tolerance object may be
        atol, rtol = 1e-3, 1e-2

    cmp = compare(t(1.0), t(1.0 + 1e-4), Plain())
    assert cmp.ok and cmp.detail.startswith("max abs err")
    recorded: dict[str, object] = {}
    record_numerics(t(1.0), t(1.0), Plain(), lambda k, v: recorded.__setitem__(k, v))
    assert (recorded["atol"], recorded["rtol"]) == ("0.001", "0.01")
