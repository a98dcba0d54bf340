"""The tolerance lookup every numeric check asks (harness.matrix.model.Tolerances.lookup,
and the ``tolerance`` fixture's make_tolerance_lookup): the most specific layer wins, op
over dtype, and it says which layer answered. A wrong answer loosens or tightens every
check at once, silently."""

from __future__ import annotations

import pytest

from harness.errors import UsageError
from harness.matrix.model import Tol, Tolerances
from harness.plugin.profile import load_profile
from harness.plugin.session import Tolerance, make_tolerance_lookup

F32, BF16 = Tol(atol=1e-5, rtol=1e-6), Tol(atol=1e-3, rtol=1e-2)
BITWISE = Tol(atol=0, rtol=0, bitwise=True)
TOLS = Tolerances(
    by_dtype={"float32": F32, "bfloat16": BF16},
    ops={"rms_norm": {"bfloat16": Tol(atol=2e-2, rtol=2e-2), "*": BITWISE},
         "linear": {"float16": Tol(atol=5e-3, rtol=5e-3)}},
    origins={"float32": "base"},
)


@pytest.mark.parametrize(("dtype", "op", "want"), [
    ("float32", None, (F32, "base")),
    ("torch.float32", None, (F32, "base")),
    ("bfloat16", None, (BF16, "platform")),  # no origin recorded: the platform's
    ("bfloat16", "rms_norm", (Tol(atol=2e-2, rtol=2e-2), "op:rms_norm")),
    ("torch.bfloat16", "rms_norm", (Tol(atol=2e-2, rtol=2e-2), "op:rms_norm")),
    ("float32", "rms_norm", (BITWISE, "op:rms_norm")),  # the op's "*"
    ("float16", "rms_norm", (BITWISE, "op:rms_norm")),
    ("bfloat16", "linear", (BF16, "platform")),  # the op has no entry for this dtype
    ("float16", "linear", (Tol(atol=5e-3, rtol=5e-3), "op:linear")),
    ("float32", "gelu_and_mul", (F32, "base")),  # an op without entries
])
def test_lookup_layers(dtype: str, op: str | None, want: tuple[Tol, str]) -> None:
    assert TOLS.lookup(dtype, op) == want


def test_an_unknown_dtype_is_a_usage_error_naming_the_known() -> None:
    with pytest.raises(UsageError, match=r"^no tolerance for dtype 'complex64' \(known: "
                                         r"float32, bfloat16\)$"):
        TOLS.lookup("torch.complex64")
    with pytest.raises(UsageError):
        TOLS.lookup("float16", "gelu_and_mul")


def test_the_fixture_s_lookup_names_the_platform_and_layer() -> None:
    torch = pytest.importorskip("torch")
    lookup = make_tolerance_lookup(load_profile("cpu", emulate=False))
    assert lookup(torch.float32) == Tolerance(1e-5, 1.3e-6, False, "cpu/base")
    assert lookup("bfloat16", "e2e_logits") == Tolerance(0.08, 1.6e-2, False,
                                                         "cpu/op:e2e_logits")
    assert lookup(torch.bfloat16, "rms_norm").source == "cpu/base"
    rocm = make_tolerance_lookup(load_profile("rocm", emulate=True))
    assert rocm(torch.float8_e4m3fnuz).source.startswith("rocm/")
