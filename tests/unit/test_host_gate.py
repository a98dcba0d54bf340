"""Whether a lane or a known failure applies on a host is the matrix's own data, asked the
way ``harness run`` asks it, and tested here on the three CPUs this project's machines
have had (whatever CPU runs this test): AMD EPYC Zen 4 (AVX-512 BF16 and VNNI), AMD EPYC
Zen 3 (AVX2 only) and an Intel Xeon Sapphire Rapids (AVX-512 and AMX).

The hosts are ``lscpu -J`` captures (tests/data/probe/lscpu-*.json), fed to the probe as
its command's output, and, for the CLI, as an ``lscpu`` on PATH that prints them.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.matrix import list_matrices, load_matrix
from harness.matrix.known_failures import entries_for
from harness.platform import probe
from harness.platform.doctor import check_cpu_probe

DATA = Path(__file__).resolve().parents[1] / "data" / "probe"
HOSTS = {"zen4": "lscpu-zen4.json", "zen3": "lscpu-zen3.json", "intel": "lscpu-intel-spr.json"}
FNUZ = "suites/kernel_parity/test_parity.py::test_parity[fp8_scaled_gemm-a-tensor-w-tensor-*"


def lscpu(host: str) -> str:
    return (DATA / HOSTS[host]).read_text()


def flags(host: str) -> frozenset[str]:
    return frozenset(probe.parse_lscpu(lscpu(host))["flags"])


def answer(host: str) -> probe.CommandRunner:
    return lambda argv: (0, lscpu(host))


# What the zen matrix's probe says of each host: None where it accepts it.
ZEN_REFUSES = {
    "zen4": None,
    "zen3": "probe: expected CPU flags avx512_bf16, avx512_vnni, not reported",
    "intel": "probe: expected CPU vendor AuthenticAMD, found GenuineIntel",
}


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_zen_lane_gate_is_the_zen_matrix_probe(host: str) -> None:
    check = check_cpu_probe(load_matrix("zen"), answer(host))
    want = ZEN_REFUSES[host]
    assert check.ok is (want is None), check.line()
    if want is not None:
        assert check.detail == want
        assert check.line().endswith("use --emulate to run the zen profile on this CPU")


def test_the_three_hosts_are_what_they_say() -> None:
    assert {"avx512_bf16", "avx512_vnni"} <= flags("zen4") and "amx_int8" not in flags("zen4")
    assert "avx2" in flags("zen3") and not any(f.startswith("avx512") for f in flags("zen3"))
    assert {"avx512_bf16", "amx_int8", "amx_tile"} <= flags("intel")


@pytest.mark.parametrize(("host", "applies"), [("zen4", False), ("zen3", False),
                                               ("intel", True)])
def test_fnuz_per_tensor_entry_applies_only_with_amx_int8(host: str, applies: bool) -> None:
    """torch's CPU _scaled_mm takes oneDNN's path (which rejects fnuz) only with AMX-INT8."""
    entries = entries_for(load_matrix("rocm"), emulate=True, host_flags=flags(host))
    found = [e for e in entries if e.raw.startswith(FNUZ)]
    assert bool(found) is applies
    unconditioned = [e for e in entries if e.host is None]
    assert len(unconditioned) == len(load_matrix("rocm").known_failures) - 1


def test_an_unknown_host_keeps_every_entry_marked() -> None:
    """The nightly report reads runs of many hosts: every entry, the host condition kept."""
    entries = entries_for(load_matrix("rocm"), emulate=True, host_flags=None)
    (fnuz,) = [e for e in entries if e.raw.startswith(FNUZ)]
    assert fnuz.host is not None and fnuz.host.cpu_flags == ("amx_int8",)
    assert "(on a host CPU with amx_int8)" in fnuz.describe()


def test_host_condition_with_absent_flags() -> None:
    from harness.matrix.model import HostCondition

    without_bf16 = HostCondition(cpu_flags_absent=("avx512_bf16",))
    assert [h for h in sorted(HOSTS) if without_bf16.holds(flags(h))] == ["zen3"]
    both = HostCondition(cpu_flags=("avx2",), cpu_flags_absent=("avx512_vnni",))
    assert [h for h in sorted(HOSTS) if both.holds(flags(h))] == ["zen3"]
    assert both.describe() == "on a host CPU with avx2 and without avx512_vnni"


def _fake_lscpu(tmp_path: Path, host: str) -> str:
    """A folder holding an ``lscpu`` that prints the host's capture, first on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    script = folder / "lscpu"
    script.write_text(f"#!/bin/sh\ncat '{DATA / HOSTS[host]}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def _harness(tmp_path: Path, host: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": _fake_lscpu(tmp_path, host), "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "harness", *args], env=env, text=True,
                          capture_output=True, check=False, timeout=120)


@pytest.mark.parametrize("host", ["zen3", "intel"])
def test_doctor_and_run_refuse_zen_with_the_probes_line(tmp_path: Path, host: str) -> None:
    doctor = _harness(tmp_path, host, "doctor", "--matrix", "zen")
    assert doctor.returncode == 3, doctor.stdout
    (line,) = [ln for ln in doctor.stdout.splitlines() if ln.startswith("MISSING")]
    assert f"CPU for matrix zen: {ZEN_REFUSES[host]}" in line
    run = _harness(tmp_path, host, "run", "--matrix", "zen", "--suite", "platform",
                   "--reports", str(tmp_path / "r"))
    assert run.returncode == 3 and run.stderr.strip().splitlines() == [
        f"harness: error: {ZEN_REFUSES[host]}; to run the zen profile on this CPU: "
        "harness run --matrix zen --emulate"], run.stderr
    assert not (tmp_path / "r").exists()
    assert not (tmp_path / ".cache" / "harness" / "venvs").exists()


def test_skip_unavailable_records_the_lane_as_skipped(tmp_path: Path) -> None:
    run = _harness(tmp_path, "zen3", "run", "--matrix", "zen", "--suite", "platform",
                   "--skip-unavailable", "--reports", str(tmp_path / "r"))
    assert run.returncode == 0, run.stderr
    (folder,) = (tmp_path / "r" / "zen").iterdir()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "skipped" and manifest["exit_code"] == 0
    assert manifest["infra_error"]["message"].startswith(ZEN_REFUSES["zen3"])
    assert manifest["suites"] == []
    assert not (tmp_path / ".cache" / "harness" / "venvs").exists()  # nothing was built
    # The history and the nightly report list the lane as skipped with the probe's line.
    db = str(tmp_path / "history.sqlite")
    ingest = _harness(tmp_path, "zen3", "history", "ingest", str(tmp_path / "r"), "--db", db)
    assert ingest.returncode == 0, ingest.stderr
    out = tmp_path / "nightly"
    report = _harness(tmp_path, "zen3", "report", "nightly", "--history", db, "--out", str(out))
    assert report.returncode == 0, report.stderr
    data = json.loads((out / "report.json").read_text())
    lanes = {lane["name"]: lane for lane in data["lanes"]}
    assert lanes["zen"]["skipped"] == manifest["infra_error"]["message"]
    assert lanes["zen"]["latest_status"] == "skipped" and lanes["zen"]["infra_signature"] is None
    assert data["infra"] == []  # not an infrastructure failure
    declared = len(list_matrices())
    assert f"0/{declared} platforms ran (1 skipped on a host not theirs)" in data["headline"]
    assert f"**zen** skipped: `{ZEN_REFUSES['zen3']}" in (out / "report.md").read_text()


def test_doctor_accepts_zen_on_zen4(tmp_path: Path) -> None:
    doctor = _harness(tmp_path, "zen4", "doctor", "--matrix", "zen")
    lines = [ln for ln in doctor.stdout.splitlines() if "CPU for matrix zen" in ln]
    assert len(lines) == 1 and lines[0].startswith("ok"), doctor.stdout


@pytest.mark.parametrize(("cap", "zen4_keeps"), [
    (None, {"avx2", "avx512f", "avx512_vnni", "avx512_bf16"}),
    ("AVX2", {"avx2"}),
    ("avx512_core", {"avx2", "avx512f"}),
    ("AVX512_CORE_VNNI", {"avx2", "avx512f", "avx512_vnni"}),
    ("ALL", {"avx2", "avx512f", "avx512_vnni", "avx512_bf16"}),
])
def test_onednn_cap_is_the_cpu_the_kernels_see(cap: str | None, zen4_keeps: set[str]) -> None:
    from harness.matrix.schema import CPU_FLAGS
    from harness.platform.host import kernel_cpu_flags

    env = {"ONEDNN_MAX_CPU_ISA": cap} if cap else {}
    seen = kernel_cpu_flags(flags("zen4"), env)
    assert {f for f in seen if f in CPU_FLAGS} == zen4_keeps
    assert "sse4_2" in seen  # flags no level names stay


def test_the_avx2_lane_applies_the_avx2_findings_on_any_host() -> None:
    """vllm-cpu-avx2 caps oneDNN at AVX2: its entries read the capped flags, so the entries
    of an AVX2-only host apply on Zen 4 and Intel too, and on none of them under vllm-cpu."""
    from harness.platform.host import kernel_cpu_flags

    def applied(matrix: str, host: str) -> set[str]:
        m = load_matrix(matrix)
        seen = kernel_cpu_flags(flags(host), dict(m.runtime.env))
        return {e.raw.split("[", 1)[1] for e in entries_for(m, emulate=False, host_flags=seen)
                if e.host is not None}

    avx2 = {host: applied("vllm-cpu-avx2", host) for host in HOSTS}
    assert avx2["zen4"] == avx2["zen3"] == avx2["intel"]
    assert any(i.startswith("linear-*-bfloat16") for i in avx2["zen4"])
    assert any(i.startswith("int8_scaled_gemm") for i in avx2["zen4"])
    native = {host: applied("vllm-cpu", host) for host in HOSTS}
    assert native["zen3"] == avx2["zen3"]  # the real AVX2 host: the same findings
    assert not any(i.startswith(("linear-*-bfloat16", "int8")) for i in native["zen4"])
    assert not any(i.startswith("linear-*-float16") for i in native["intel"])  # avx512_fp16
