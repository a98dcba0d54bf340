"""Loading, merging and the capability / tolerance model of the shipped matrices."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import ConfigError, UsageError
from harness.matrix import Matrix, list_matrices, load_matrix
from harness.matrix.merge import merge
from harness.matrix.model import Tol
from harness.matrix.yamlsafe import ldict, llist
from harness.roots import project_root

ROOT = project_root()
DATA = ROOT / "tests" / "data" / "matrices"
SHIPPED = ("cpu", "cpu-v3", "cuda", "rocm", "rocm-mi355", "s390x", "vllm-cpu", "vllm-cpu-avx2",
           "vllm-cpu-v2", "vllm-cpu-v3", "vllm-zen", "xpu", "zen")


def test_list_hides_abstract_base() -> None:
    assert tuple(list_matrices()) == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_matrix_loads(name: str) -> None:
    matrix = load_matrix(name)
    assert matrix.name == name
    assert matrix.file == f"matrices/{name}.yaml"
    assert not matrix.abstract
    assert matrix.runtime.network == "none"
    assert set(matrix.kernels) == set(load_matrix("base").kernels)
    for dtype in matrix.dtypes:
        tol, _ = matrix.tolerances.lookup(dtype)
        assert tol.atol >= 0
    assert len(matrix.hash) == 64


def test_family_facts() -> None:
    rocm, mi355, cuda = load_matrix("rocm"), load_matrix("rocm-mi355"), load_matrix("cuda")
    assert (rocm.device, rocm.arch, rocm.fp8.e4m3) == ("cuda", ("gfx942",), "float8_e4m3fnuz")
    assert rocm.runtime.devices == ("/dev/kfd", "/dev/dri")
    assert rocm.runtime.shm_size == "16g"
    assert (mi355.arch, mi355.fp8.e4m3, mi355.probe.expect["arch"]) == (
        ("gfx950",),
        "float8_e4m3fn",
        "gfx950",
    )
    # inherited from rocm.yaml, untouched by mi355
    assert mi355.runtime == rocm.runtime
    assert mi355.capabilities.has("mx_fp8") and not rocm.capabilities.has("mx_fp8")
    assert cuda.probe.expect == {"compute_cap": "9.0", "min_devices": 1}
    s390x = load_matrix("s390x")
    assert (s390x.byteorder, s390x.runtime.platform) == ("big", "linux/s390x")
    assert s390x.fp8.e4m3 is None and not s390x.capabilities.has("fp8")
    # partial suite entries merge onto base's
    assert s390x.suites["fusion"].enabled is True and s390x.suites["fusion"].workers == 1
    assert s390x.suites["kernel_parity"].path == "suites/kernel_parity"
    assert s390x.suites["kernel_parity"].tier == "smoke"


def test_zen_appends_capabilities_and_puts_zentorch_first() -> None:
    cpu, zen = load_matrix("cpu"), load_matrix("zen")
    assert zen.capabilities.provides == cpu.capabilities.provides | {
        "avx512_bf16",
        "avx512_vnni",
        "zentorch",
    }
    assert zen.kernels["linear"][0] == "zentorch"
    assert zen.kernels["silu_and_mul"] == cpu.kernels["silu_and_mul"]
    pins = zen.python.requirements
    assert "torch==2.14.1" in pins and "zentorch==2.14.0.1" in pins


def test_capability_closure_and_emulation() -> None:
    caps = load_matrix("rocm").capabilities
    assert caps.has("fp8") and caps.has("fp8_e4m3fnuz")
    assert "fp8" in caps.closure() and "fp8" not in caps.provides
    assert caps.has("fp8_e4m3fnuz", emulate=True)  # torch casts fnuz on the CPU
    assert not caps.has("cuda_graphs", emulate=True)
    assert caps.why_missing("cuda_graphs", emulate=True) == (
        "rocm: cuda_graphs needs hardware (emulated on the CPU)"
    )
    assert caps.why_missing("cuda_graphs") is None
    assert load_matrix("cpu").capabilities.why_missing("fp8_e4m3fnuz") == (
        "cpu does not provide fp8_e4m3fnuz"
    )
    assert caps.known("gloo") and not caps.known("gloo2")
    with pytest.raises(UsageError, match=r"unknown capability 'cuda_graph' \(did you mean"):
        caps.has("cuda_graph")


def test_s390x_parent_chain() -> None:
    caps = load_matrix("s390x").capabilities
    assert {"s390x_vx", "s390x_vxe", "s390x_vxe2"} <= caps.closure()
    assert not caps.has("s390x_vxe2", emulate=True)


def test_tolerance_layers_base_platform_op() -> None:
    custom = load_matrix(DATA / "good_custom.yaml")
    assert custom.name == "my-mi300"
    assert custom.tolerances.lookup("float32") == (Tol(atol=1e-5, rtol=1.3e-6), "base")
    assert custom.tolerances.lookup("torch.float16") == (Tol(atol=2e-3, rtol=2e-3), "platform")
    assert custom.tolerances.lookup("bfloat16", "rms_norm") == (
        Tol(atol=2e-2, rtol=2e-2),
        "op:rms_norm",
    )
    assert custom.tolerances.lookup("float32", "rms_norm") == (
        Tol(atol=0.0, rtol=0.0, bitwise=True),
        "op:rms_norm",
    )
    assert custom.tolerances.lookup("bfloat16", "linear")[1] == "base"
    with pytest.raises(UsageError):
        custom.tolerances.lookup("complex64")


def test_user_matrix_appends_and_records_known_failure_lines() -> None:
    custom = load_matrix(str(DATA / "good_custom.yaml"))
    rocm = load_matrix("rocm")
    assert custom.capabilities.provides == rocm.capabilities.provides | {"onednn"}
    assert custom.runtime.env_allowlist == (*rocm.runtime.env_allowlist, "MY_TOKEN")
    (failure,) = custom.known_failures
    assert (failure.file, failure.line) == ("tests/data/matrices/good_custom.yaml", 17)
    assert failure.expires == datetime.date(2099, 12, 31)
    assert failure.requires == ("hipblaslt",)
    assert custom.extends == "rocm.yaml"


def test_own_keys_are_not_inherited() -> None:
    rocm = load_matrix("rocm")
    assert rocm.abstract is False and rocm.extends == "base.yaml"
    assert load_matrix("base").abstract is True
    assert load_matrix("rocm-mi355").extends == "rocm.yaml"


def test_resolved_is_json_and_round_trips(tmp_path: Path) -> None:
    matrix = load_matrix(DATA / "good_custom.yaml")
    text = json.dumps(matrix.resolved)
    assert list(matrix.resolved)[:4] == ["name", "file", "extends", "abstract"]
    path = tmp_path / "matrix.json"
    path.write_text(text)
    again = load_matrix(path)
    assert again == matrix
    assert again.hash == matrix.hash
    assert again.known_failures[0].line == 17
    assert again.tolerances.lookup("float16")[1] == "platform"


def test_hash_is_stable_and_follows_content(tmp_path: Path) -> None:
    assert load_matrix("cpu").hash == load_matrix("cpu").hash
    (tmp_path / "matrices").mkdir()
    for name in ("base.yaml", "cpu.yaml"):
        (tmp_path / "matrices" / name).write_text((ROOT / "matrices" / name).read_text())
    same = load_matrix("cpu", root=tmp_path)
    assert same.hash == load_matrix("cpu").hash
    cpu = tmp_path / "matrices" / "cpu.yaml"
    cpu.write_text(cpu.read_text().replace("shards: 2", "shards: 3"))
    assert load_matrix("cpu", root=tmp_path).hash != same.hash


def test_harness_root_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HARNESS_ROOT", str(tmp_path))
    assert project_root() == tmp_path.resolve()
    # a project with no matrices of its own still sees the shipped ones
    assert list_matrices() == list_matrices(ROOT)
    assert load_matrix("cpu").file == "matrices/cpu.yaml"  # the shipped one
    with pytest.raises(ConfigError, match="no matrix named 'cpx' \\(did you mean cpu\\?\\)"):
        load_matrix("cpx")


def test_yaml_1_2_floats_and_located_merge() -> None:
    parent = ldict(
        {
            "a": llist([1], ("p.yaml", 2), [("p.yaml", 2)]),
            "d": ldict({"x": 1, "y": 2}, ("p.yaml", 3)),
        },
        ("p.yaml", None),
        {"a": ("p.yaml", 2)},
    )
    child = ldict(
        {
            "a+": llist([2], ("c.yaml", 5), [("c.yaml", 5)]),
            "d": ldict({"y": 3}, ("c.yaml", 6), {"y": ("c.yaml", 7)}),
        },
        ("c.yaml", None),
        {"a+": ("c.yaml", 5), "d": ("c.yaml", 6)},
    )
    errors: list[ConfigError] = []
    out = merge(parent, child, errors)
    assert errors == []
    assert out == {"a": [1, 2], "d": {"x": 1, "y": 3}}
    assert out["a"].loc == [("p.yaml", 2), ("c.yaml", 5)]
    assert out["d"].where("y") == ("c.yaml", 7)
    assert parent == {"a": [1], "d": {"x": 1, "y": 2}}  # never mutated
    base = load_matrix("base")
    assert base.tolerances.by_dtype["float32"].atol == 1e-5


def test_matrix_is_frozen() -> None:
    matrix: Matrix = load_matrix("cpu")
    with pytest.raises(AttributeError):
        matrix.name = "other"  # type: ignore[misc]


def test_no_torch_at_import_or_load() -> None:
    code = (
        "import sys; import harness.cli, harness.matrix as m; m.load_matrix('rocm'); "
        "sys.exit('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60, check=False)
    assert result.returncode == 0
