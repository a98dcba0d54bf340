"""Bugs the hand-picked cases once let through, each caught now (issue 13): a kernel that
ignores an optional argument, assumes one scale granularity for another, drops the tile
offset of a row's second block, accumulates a long reduction in half precision, or leaves
an in-place output unwritten; plus the coverage check that finds a value no case has, and
the cpu matrix's parity suite checking the triton provider it lists.

Each bug passes the cases that existed before (asserted), so the new cases are what
catch it, through the same check the suite runs (parity_check.check_case)."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from provider_bugs import ROOT, SUITE, tolerance

from refengine.ops import reference
from refengine.ops.spec import OPS

sys.path.insert(0, str(SUITE))
from arg_coverage import coverage
from parity_cases import Case, case_where, cases_for, values_of
from parity_check import ParityError, check_case

from refengine.ops.domains import missing


def _case(op: str, which: str | dict[str, str]) -> Case:
    """A kept case by its id, or the first case (kept or generated) with these values."""
    if isinstance(which, dict):
        return case_where(op, **which)
    return next(c for c in cases_for(op) if c.id == which)


def _run(op: str, which: str | dict[str, str], impl: Any, dtype: torch.dtype,
         fp8: torch.dtype | None = None) -> None:
    case = _case(op, which)

    def build() -> tuple[Any, ...]:
        return case.args(dtype, fp8, "cpu", 0)

    check_case(op, build, impl, tolerance, case.id, case.layout)


# -- the bugs ----------------------------------------------------------------------------

def ignores_softmax_scale(q: Any, k: Any, v: Any, scale: float, causal: bool) -> Any:
    return reference.attention_prefill(q, k, v, q.shape[-1] ** -0.5, causal)


def eps_hard_coded(x: Any, weight: Any, eps: float) -> Any:
    return reference.rms_norm(x, weight, 1e-5)


def weight_scale_follows_activation_scale(a: Any, a_scales: Any, w: Any, w_scales: Any,
                                          bias: Any, out_dtype: Any) -> Any:
    # per-tensor activations taken to mean a per-tensor weight too
    if a_scales.numel() == 1:
        w_scales = w_scales.reshape(-1)[:1]
    return reference.fp8_scaled_gemm(a, a_scales, w, w_scales, bias, out_dtype)


def bf16_partial_sums(x: Any, weight: Any, bias: Any) -> Any:
    # split-K over 256-wide chunks, the running sum stored in x's dtype between chunks
    acc = None
    for k0 in range(0, x.shape[-1], 256):
        part = x[..., k0:k0 + 256].float() @ weight[:, k0:k0 + 256].float().t()
        acc = part if acc is None else acc.to(x.dtype).float() + part
    assert acc is not None
    return (acc + (bias.float() if bias is not None else 0)).to(x.dtype)


def residual_not_written(x: Any, residual: Any, weight: Any, eps: float) -> Any:
    return reference.rms_norm((x.float() + residual.float()).to(residual.dtype), weight, eps)


BUGS: dict[str, tuple[str, str | dict[str, str], dict[str, str], Any, torch.dtype,
                      torch.dtype | None]] = {
    # bug: (op, a case like those that existed before, the argument values of the new
    # cases that catch it (the generated case with them), impl, dtype, fp8)
    "ignores-softmax-scale": ("attention_prefill", "causal-gqa", {"scale": "other"},
                              ignores_softmax_scale, torch.float32, None),
    "epsilon-hard-coded": ("rms_norm", "2d-odd", {"eps": "large"}, eps_hard_coded,
                           torch.float32, None),
    "one-scale-granularity-for-another": ("fp8_scaled_gemm",
                                          {"a_scales": "per-tensor", "w_scales": "per-tensor"},
                                          {"a_scales": "per-tensor", "w_scales": "per-channel"},
                                          weight_scale_follows_activation_scale, torch.bfloat16,
                                          torch.float8_e4m3fn),
    "half-precision-accumulator": ("linear", {"k": "small"}, {"k": "large-k"},
                                   bf16_partial_sums, torch.bfloat16, None),
}


@pytest.mark.parametrize("bug", BUGS)
def test_new_case_catches_what_the_old_ones_let_through(bug: str) -> None:
    op, old, new, impl, dtype, fp8 = BUGS[bug]
    _run(op, old, impl, dtype, fp8)  # passed before
    with pytest.raises(ParityError):
        _run(op, new, impl, dtype, fp8)
    _run(op, new, getattr(reference, op), dtype, fp8)  # the case itself is sound


def test_in_place_output_left_unwritten_fails_the_contract() -> None:
    for case in cases_for("add_rms_norm"):
        with pytest.raises(ParityError, match="mutated input 'residual'"):
            _run("add_rms_norm", case.id, residual_not_written, torch.float32)


def _buggy_triton_norm(tmp_path: Path) -> Any:
    """refengine's Triton rms_norm with the tile offset dropped from the second pass."""
    source = (ROOT / "refengine" / "triton_kernels" / "norm.py").read_text()
    good = "        cols = tile * BLOCK + tl.arange(0, BLOCK)\n        mask = cols < n_cols\n"
    assert good in source
    path = tmp_path / "buggy_triton_norm.py"
    path.write_text(source.replace(good, "        cols = tl.arange(0, BLOCK)\n"
                                         "        mask = cols < n_cols\n", 1))
    spec = importlib.util.spec_from_file_location("buggy_triton_norm", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_multi_tile_row_catches_a_dropped_tile_offset(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    buggy = _buggy_triton_norm(tmp_path)
    _run("rms_norm", "2d-odd", buggy.rms_norm, torch.float32)  # one tile: passes
    with pytest.raises(ParityError):
        _run("rms_norm", {"width": "multi-tile"}, buggy.rms_norm, torch.float32)


def test_coverage_names_a_value_no_case_has() -> None:
    cases = tuple(c for c in cases_for("attention_prefill")
                  if values_of(c)["scale"] != "other")
    row = coverage("attention_prefill", "native", cases, ["float32"], "cpu")
    assert row.missing == ["scale=other"]
    full = coverage("attention_prefill", "native", cases_for("attention_prefill"),
                    ["float32"], "cpu")
    assert full.missing == []


def test_coverage_names_a_dtype_no_case_runs_on() -> None:
    cases = cases_for("gelu_and_mul", ("float32", "bfloat16"))  # generated over two dtypes
    row = coverage("gelu_and_mul", "native", cases, ["float32", "bfloat16", "float16"], "cpu")
    assert row.missing == ["dtype=float16"]


def test_pairwise_scale_shapes_are_required() -> None:
    # the two cases there were: per-tensor scales, and per-token with per-channel
    seen = [{"a_scales": "per-tensor", "w_scales": "per-tensor"},
            {"a_scales": "per-token", "w_scales": "per-channel"}]
    gaps = missing("fp8_scaled_gemm", seen)
    assert "a_scales=per-tensor & w_scales=per-channel" in gaps
    assert "a_scales=per-token & w_scales=per-tensor" in gaps


def test_every_op_declares_its_domains() -> None:
    from refengine.ops.domains import DOMAINS

    assert set(DOMAINS) == set(OPS)


def test_cpu_parity_suite_checks_the_triton_provider_it_lists() -> None:
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--platform", "cpu", str(SUITE / "test_parity.py"),
         "--collect-only", "-q", "-k", "triton", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    ids = [ln for ln in proc.stdout.splitlines() if "test_parity[" in ln]
    for op in ("rms_norm", "add_rms_norm", "silu_and_mul", "fp8_quant"):
        assert any(f"[{op}-" in i and "-triton-cpu]" in i for i in ids), (op, proc.stdout[-2000:])


SCALED_MOE_PROVIDER = '''
from refengine.ops import reference
from refengine.providers import TableProvider

def fused_moe(x, router_logits, w13, w2, top_k, renormalize):
    out = reference.fused_moe(x, router_logits, w13, w2, top_k, renormalize)
    return (out.float() * 1.25).to(out.dtype)  # a new bug: every output 25% too large

class Buggy(TableProvider):
    name = "buggy"

def make_provider(device):
    return Buggy(device, {"fused_moe": fused_moe})
'''


def test_a_known_failure_id_no_longer_hides_a_new_bug(tmp_path: Path) -> None:
    """The same id as a known bf16 rounding failure, now wrong for another reason: with the
    entry's signature (the torch entry's, copied) the run fails; without one it was an xfail."""
    import subprocess

    (tmp_path / "buggy_moe.py").write_text(SCALED_MOE_PROVIDER)
    entry = ("  - id: suites/kernel_parity/test_parity.py::test_parity"
             "[fused_moe-*-bfloat16-buggy-cpu]\n    reason: bf16 rounding\n    action: xfail\n")
    signature = ("    expect: {raises: ParityError, match: out of tolerance against native, "
                 "headroom: {min: 1.0, max: 12.0}}\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
               REFENGINE_PROVIDER_MODULES="buggy=buggy_moe", KERNEL_PARITY_PROVIDERS="buggy")
    outcomes = {}
    for name, text in (("unsigned", entry), ("signed", entry + signature)):
        matrix = tmp_path / f"{name}.yaml"
        matrix.write_text(f"extends: {ROOT / 'matrices' / 'cpu.yaml'}\nname: {name}\n"
                          f"known_failures:\n{text}")
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--platform", str(matrix),
             str(SUITE / "test_parity.py"), "-q", "-p", "no:cacheprovider",
             "-k", "fused_moe and bfloat16 and buggy"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        outcomes[name] = (proc.returncode, proc.stdout + proc.stderr)
    assert outcomes["unsigned"][0] == 0 and "3 xfailed" in outcomes["unsigned"][1], outcomes
    code, out = outcomes["signed"]
    assert code == 1 and "3 failed" in out, out
    assert "expects another failure: headroom in [1.0, 12.0], found" in out, out


def test_multi_tile_class_follows_the_triton_block_cap() -> None:
    import inspect

    from refengine.ops.domains import TILE_CAP
    from refengine.triton_kernels._rows import tiles

    assert inspect.signature(tiles).parameters["cap"].default == TILE_CAP
    assert tiles(TILE_CAP + 1)["N_TILES"] == 2


SHY_TRITON = '''
import torch
from refengine.providers.triton_provider import TritonProvider

class Shy(TritonProvider):
    name = "{name}"

    def supports(self, op, dtype, shapes, layout):
        if {bug} and dtype == torch.float16:  # a dtype check missing one entry
            return False, "rms_norm kernels take float32/bfloat16"
        return super().supports(op, dtype, shapes, layout)

def make_provider(device):
    return Shy(device)
'''


def test_a_provider_declining_what_it_serves_fails_coverage(tmp_path: Path) -> None:
    """A checked provider (not the platform's primary) that turns float16 cases down made
    them skips, and the suite passed (mutation testing of triton's supports() found it):
    every undeclared decline is now a coverage hole. The same provider without the bug
    passes, so the failure is the decline's."""
    import subprocess

    outcomes = {}
    for name, bug in (("shy", True), ("plain", False)):
        (tmp_path / f"{name}_triton.py").write_text(SHY_TRITON.format(name=name, bug=bug))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
                   REFENGINE_PROVIDER_MODULES=f"{name}={name}_triton",
                   KERNEL_PARITY_PROVIDERS=name)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--platform", "cpu",
             str(SUITE / "test_coverage.py"), "-q", "-p", "no:cacheprovider",
             "-k", "every and rms_norm and not add"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        outcomes[name] = (proc.returncode, proc.stdout + proc.stderr)
    code, out = outcomes["shy"]
    assert code == 1 and "shy declined" in out and "no DECLINES entry declares" in out, out
    assert outcomes["plain"][0] == 0, outcomes["plain"][1]


def test_a_declared_decline_that_stops_happening_is_stale() -> None:
    from declines import decline_holes

    fnuz = ["float8_e4m3fnuz"]
    turned_down = [("per-token-dynamic", "float8_e4m3fnuz", "interpreter has no fnuz")]
    assert decline_holes("fp8_quant", "triton", turned_down, fnuz, "cpu") == []
    assert decline_holes("fp8_quant", "triton", [], fnuz, "cpu") == [
        "triton's declared decline at float8_e4m3fnuz (Triton's interpreter has no fnuz fp8 "
        "types (emulated ROCm gfx942)) did not happen (a stale entry)"]
