"""Provider selection: priority walk, fallback, disabled / forced / env, explain reasons."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

import refengine.ops as ops
from refengine import registry as reg
from refengine.ops import dispatch, reference
from refengine.providers import get_provider
from refengine.registry import NoProvider, Registry

BF16 = torch.bfloat16


def test_first_supporting_provider_in_priority_order_wins() -> None:
    r = Registry({"rms_norm": ["torch", "native"]}, use_env=False)
    assert r.select("rms_norm", BF16).name == "torch"
    walk = r.explain("rms_norm", BF16)
    assert [(c.provider, c.chosen) for c in walk] == [("torch", True), ("native", False)]
    assert walk[0].reason == "priority 1 of 2"


def test_unsupported_provider_falls_back_to_native_with_its_reason() -> None:
    r = Registry({"rotary_embedding": ["torch"]}, use_env=False)
    walk = r.explain("rotary_embedding", BF16)
    assert walk[0].provider == "torch" and not walk[0].chosen
    assert "no fused rotary" in walk[0].reason
    assert walk[1].provider == "native" and walk[1].chosen and walk[1].reason == "fallback"


def test_disabled_and_unknown_providers_are_rejected_with_reasons() -> None:
    r = Registry({"linear": ["nope", "torch", "native"]}, disabled=["torch"], use_env=False)
    reasons = {c.provider: c.reason for c in r.explain("linear", BF16)}
    assert "unknown provider 'nope'" in reasons["nope"]
    assert reasons["torch"] == "disabled"
    assert r.select("linear", BF16).name == "native"


def test_native_cannot_be_disabled() -> None:
    r = Registry({}, disabled=["native"], use_env=False)
    assert r.select("linear", BF16).name == "native"


def test_forced_provider_that_cannot_serve_is_an_error_naming_why() -> None:
    r = Registry({}, forced="torch", use_env=False)
    assert r.select("linear", BF16).name == "torch"
    with pytest.raises(NoProvider, match="no fused fp8 quantization"):
        r.select("fp8_quant", torch.float8_e4m3fn)


def test_env_disables_and_forces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFENGINE_DISABLE_PROVIDERS", "torch, inductor")
    assert Registry({"linear": ["torch"]}).select("linear", BF16).name == "native"
    monkeypatch.delenv("REFENGINE_DISABLE_PROVIDERS")
    monkeypatch.setenv("REFENGINE_FORCE_PROVIDER", "torch")
    assert Registry({"linear": ["native"]}).select("linear", BF16).name == "torch"
    assert Registry({"linear": ["native"]}, use_env=False).select("linear", BF16).name == "native"


def test_unknown_op_in_priorities_is_rejected() -> None:
    with pytest.raises(ValueError, match="rms_nrom"):
        Registry({"rms_nrom": ["torch"]})


def test_from_matrix_marks_providers_of_missing_capabilities() -> None:
    from harness.matrix import load_matrix

    matrix = load_matrix("cpu")
    r = Registry.from_matrix({"rms_norm": ["zentorch", "torch", "native"]}, use_env=False)
    assert r.select("rms_norm", BF16).name == "torch"
    r = Registry.from_matrix(matrix, use_env=False)
    assert r.device == "cpu"
    assert r.select("linear", BF16).name == matrix.kernels["linear"][0]


COUNTING = textwrap.dedent('''
    from refengine.ops import reference
    from refengine.providers import TableProvider

    CALLS = []

    class Counting(TableProvider):
        name = "counting"

    def _rms(x, weight, eps):
        CALLS.append(tuple(x.shape))
        return reference.rms_norm(x, weight, eps)

    def make_provider(device):
        return Counting(device, {"rms_norm": _rms})
''')


def test_custom_op_dispatches_through_the_current_registry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "counting_provider.py").write_text(COUNTING)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("REFENGINE_PROVIDER_MODULES", "counting=counting_provider")
    module = sys.modules.get("counting_provider") or __import__("counting_provider")
    x, w = torch.randn(3, 8), torch.ones(8)
    with reg.using(Registry({"rms_norm": ["counting"]}, use_env=False)):
        ops.rms_norm(x, w)
    assert module.CALLS == [(3, 8)]
    with reg.forced("counting"):
        ops.rms_norm(x, w)
        with pytest.raises(NoProvider, match="counting has no silu_and_mul kernel"):
            ops.silu_and_mul(torch.randn(2, 4))
    assert module.CALLS == [(3, 8), (3, 8)]
    ops.rms_norm(x, w)  # back to the default registry: native
    assert len(module.CALLS) == 2
    assert get_provider("counting").name == "counting"


def test_ops_run_their_reference_where_no_registry_routes_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ops/ sits below the registry: until it is imported (and installs itself in
    ops/dispatch.py) a call runs the reference, as the default registry would, and a
    provider forced through the environment is refused rather than ignored."""
    assert dispatch._current is reg.current  # installed when the registry was imported
    monkeypatch.setattr(dispatch, "_current", None)  # as in a process that imports only ops
    monkeypatch.delenv("REFENGINE_FORCE_PROVIDER", raising=False)
    x, w = torch.randn(3, 8), torch.randn(8)
    assert torch.equal(ops.rms_norm(x, w), reference.rms_norm(x, w, 1e-6))
    monkeypatch.setenv("REFENGINE_FORCE_PROVIDER", "torch")
    with pytest.raises(RuntimeError, match="REFENGINE_FORCE_PROVIDER=torch, but refengine"):
        ops.rms_norm(x, w)
