"""A changed fusion pass fails the real fusion suite with a message naming the pass, both
counts and the torch version; --update-expectations then writes exactly the new counts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]

CHANGED_PASSES = """
import dataclasses
import torch
from torch._inductor.pattern_matcher import CallFunction, KeywordArg
from refengine.fusion import passes

def _sub_rms():  # the add + norm pattern now looks for a subtraction: stops matching
    s = CallFunction(torch.ops.aten.sub.Tensor, KeywordArg("x"), KeywordArg("residual"))
    return CallFunction(torch.ops.refengine.rms_norm.default, s, KeywordArg("weight"),
                        KeywordArg("eps"))

def _any_rms():  # the norm + quant pattern now matches every norm, quant or not
    return CallFunction(torch.ops.refengine.rms_norm.default, KeywordArg("x"),
                        KeywordArg("weight"), KeywordArg("eps"))

def _leave(match, **kw):
    pass

_defs = {d.name: d for d in passes.PASS_DEFS}
PASSES = (
    dataclasses.replace(_defs["rms_norm_quant"], pattern=_any_rms, handler=_leave),
    _defs["silu_mul_quant"],
    dataclasses.replace(_defs["add_rms_norm"], pattern=_sub_rms),
    _defs["all_reduce_rms_norm"],
)
"""


def _pytest(suite: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(suite / "test_fusion.py"),
        "-p",
        "no:cacheprovider",
        "--platform",
        "cpu",
        "-q",
        "-k",
        "test_decoder_layer and not fp8",
        "--rootdir",
        str(suite),
        *extra,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=suite)


def test_changed_pass_fails_then_updates(tmp_path: Path) -> None:
    suite = tmp_path / "fusion"
    shutil.copytree(ROOT / "suites" / "fusion", suite, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "changed_passes.py").write_text(CHANGED_PASSES)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "REFENGINE_FUSION_PASSES": "changed_passes:PASSES",
        "HARNESS_ROOT": str(ROOT),
    }
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / ".harness-cache" / "inductor"))

    failed = _pytest(suite, env)
    out = failed.stdout + failed.stderr
    assert failed.returncode == 1, out
    import torch

    assert "decoder_layer_bfloat16: pass add_rms_norm: expected 2, found 0" in out
    assert "decoder_layer_bfloat16: pass rms_norm_quant: expected 0, found 2" in out
    assert f"torch {torch.__version__}" in out

    updated = _pytest(suite, env, "--update-expectations")
    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert "-      add_rms_norm: 2" in updated.stdout and "+      add_rms_norm: 0" in updated.stdout
    written = yaml.safe_load((suite / "expectations" / "cpu.yaml").read_text())
    case = written["cases"]["decoder_layer_bfloat16"]
    assert case["passes"]["add_rms_norm"] == 0
    assert case["passes"]["rms_norm_quant"] == 2
    # The norms are no longer fused: both stay, and the kernel count moved with them.
    assert case["unfused"]["rms_norm"] == 2
    shipped = yaml.safe_load((ROOT / "suites/fusion/expectations/cpu.yaml").read_text())
    assert written["cases"]["moe_block"] == shipped["cases"]["moe_block"]  # untouched

    again = _pytest(suite, env)
    assert again.returncode == 0, again.stdout + again.stderr
