"""Probe parsers on captured tool outputs, and the expectation check's messages."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from harness.errors import InfraError
from harness.platform import probe
from harness.results.facts import PROBE_KINDS, DeviceFingerprint

DATA = Path(__file__).parent.parent / "data" / "probe"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_every_probe_kind_is_one_record_read_everywhere() -> None:
    """The probe's tools and the GPU kinds come from PROBE_KINDS (the schema's choices too:
    the committed matrix.schema.json is checked against the generated one)."""
    assert set(probe.TOOLS) == set(PROBE_KINDS) - {"none"}
    assert {k for k, p in PROBE_KINDS.items() if p.gpu} == {"nvidia-smi", "amd-smi", "xpu-smi"}
    assert DeviceFingerprint({"kind": "amd-smi"}).is_gpu
    assert not DeviceFingerprint({"kind": "lscpu"}).is_gpu
    assert not DeviceFingerprint({"kind": "an-old-kind"}).is_gpu


def test_nvidia_smi_csv() -> None:
    fp = probe.parse_nvidia_smi(read("nvidia-smi.csv"))
    assert fp["device_count"] == 2
    assert fp["arch"] == ["sm_90"]
    assert fp["devices"][1]["memory_mib"] == 81559
    probe.check("nvidia-smi", {"min_devices": 2, "compute_cap": "9.0", "arch": "sm_90"}, fp)


def test_nvidia_smi_without_compute_cap_r470() -> None:
    fp = probe.parse_nvidia_smi(read("nvidia-smi-r470.csv"))
    assert fp["devices"][0]["compute_cap"] is None
    with pytest.raises(InfraError, match=r"expected compute capability 7.0, found none"):
        probe.check("nvidia-smi", {"compute_cap": "7.0"}, fp)


def test_amd_smi_rocm7_wrapped() -> None:
    fp = probe.parse_amd_smi(read("amd-smi-rocm7.json"))
    assert fp["arch"] == ["gfx942"]
    assert fp["devices"][0]["memory_mib"] == 196592
    probe.check("amd-smi", {"arch": "gfx942", "min_devices": 1}, fp)


def test_amd_smi_bare_list_and_wrong_arch() -> None:
    fp = probe.parse_amd_smi(read("amd-smi-rocm6.json"))
    assert fp["device_count"] == 2
    with pytest.raises(InfraError) as err:
        probe.check("amd-smi", {"arch": "gfx942"}, fp)
    assert str(err.value) == "probe: expected arch gfx942, found gfx90a"


def test_amd_smi_no_gpu() -> None:
    fp = probe.parse_amd_smi(read("amd-smi-empty.json"))
    with pytest.raises(InfraError) as err:
        probe.check("amd-smi", {"arch": "gfx942", "min_devices": 1}, fp)
    assert str(err.value) == "probe: expected 1 AMD GPU, found none"


def test_xpu_smi_discovery() -> None:
    fp = probe.parse_xpu_smi(read("xpu-smi.json"))
    assert fp["devices"][0]["name"] == "Intel(R) Data Center GPU Max 1550"
    assert fp["devices"][0]["drm"] == "/dev/dri/card1"
    with pytest.raises(InfraError, match="expected 2 Intel GPUs, found 1"):
        probe.check("xpu-smi", {"min_devices": 2}, fp)


def test_lscpu_zen4_captured_here() -> None:
    fp = probe.parse_lscpu(read("lscpu-zen4.json"))
    assert fp["vendor"] == "AuthenticAMD"
    assert fp["arch"] == ["x86_64"]
    assert "avx512_bf16" in fp["flags"]
    probe.check("lscpu", {"vendor": "AuthenticAMD", "cpu_flags": ["avx512_bf16"]}, fp)
    with pytest.raises(InfraError, match="expected CPU flags amx_tile, not reported"):
        probe.check("lscpu", {"cpu_flags": ["amx_tile", "avx512_vnni"]}, fp)


def test_lscpu_nested_children() -> None:
    text = json.dumps({"lscpu": [
        {"field": "Architecture:", "data": "s390x", "children": [
            {"field": "Byte Order:", "data": "Big Endian"}]},
        {"field": "Vendor ID:", "data": "IBM/S390", "children": [
            {"field": "Flags:", "data": "esan3 zarch vx vxe vxe2 nnpa"}]},
    ]})
    fp = probe.parse_lscpu(text)
    assert fp["byteorder"] == "big"
    assert "nnpa" in fp["flags"]


def test_s390x_hwcap_bits() -> None:
    hwcap = (1 << 11) | (1 << 13) | (1 << 15) | (1 << 2)
    assert probe.s390x_features(hwcap) == ["vx", "vxe", "vxe2"]
    fp = probe.parse_s390x(json.dumps({"machine": "s390x", "byteorder": "big", "hwcap": hwcap}))
    probe.check("s390x", {"arch": "s390x", "byteorder": "big"}, fp)
    little = probe.parse_s390x('{"machine": "x86_64", "byteorder": "little", "hwcap": 0}')
    with pytest.raises(InfraError, match="expected arch s390x, found x86_64"):
        probe.check("s390x", {"arch": "s390x"}, little)


def test_s390x_script_reads_this_process_auxv(tmp_path: Path) -> None:
    # The script the container runs, run here: it must find AT_HWCAP in real auxv.
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", probe.S390X_SCRIPT], capture_output=True,
                         text=True, check=True).stdout
    fp = probe.parse_s390x(out)
    raw = Path("/proc/self/auxv").read_bytes()
    pairs = [struct.unpack_from("@QQ", raw, i) for i in range(0, len(raw) - 15, 16)]
    assert fp["hwcap"] == next(v for k, v in pairs if k == probe.AT_HWCAP)
    assert fp["byteorder"] == sys.byteorder


def test_garbage_is_one_line_infra_error() -> None:
    with pytest.raises(InfraError, match="amd-smi printed no JSON"):
        probe.parse_amd_smi("amd-smi: command not found")
