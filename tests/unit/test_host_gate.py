"""Whether a lane or a known failure applies on a host is the matrix's own data, asked the
way ``harness run`` asks it, and tested here on the three CPUs this project's machines
have had (whatever CPU runs this test): AMD EPYC Zen 4 (AVX-512 BF16 and VNNI), AMD EPYC
Zen 3 (AVX2 only) and an Intel Xeon Sapphire Rapids (AVX-512 and AMX).

The hosts are ``lscpu -J`` captures (tests/data/probe/lscpu-*.json), fed to the probe as
its command's output (the CLI with an ``lscpu`` on PATH that prints them is
tests/integration/test_host_gate_cli.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.matrix import load_matrix
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
    on_the_gpu = [kf for kf in load_matrix("rocm").known_failures if "hipblaslt" in kf.requires]
    assert len(unconditioned) == len(load_matrix("rocm").known_failures) - 1 - len(on_the_gpu)


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


def applied(matrix: str, host: str) -> set[str]:
    """The host-conditioned entries of ``matrix`` that hold on ``host`` (its params part)."""
    from harness.platform.host import kernel_cpu_flags

    m = load_matrix(matrix)
    seen = kernel_cpu_flags(flags(host), dict(m.runtime.env))
    return {e.raw.split("[", 1)[1] for e in entries_for(m, emulate=False, host_flags=seen)
            if e.host is not None}


def test_the_avx2_lane_applies_the_avx2_findings_on_any_host() -> None:
    """vllm-cpu-avx2 caps oneDNN at AVX2: its entries read the capped flags, so the entries
    of an AVX2-only host apply on Zen 4 and Intel too, and on none of them under vllm-cpu."""
    avx2 = {host: applied("vllm-cpu-avx2", host) for host in HOSTS}
    assert avx2["zen4"] == avx2["zen3"] == avx2["intel"]
    assert any(i.startswith("linear-*-bfloat16") for i in avx2["zen4"])
    assert any(i.startswith("int8_scaled_gemm") for i in avx2["zen4"])
    native = {host: applied("vllm-cpu", host) for host in HOSTS}
    assert native["zen3"] == avx2["zen3"]  # the real AVX2 host: the same findings
    assert not any(i.startswith(("linear-*-bfloat16", "int8")) for i in native["zen4"])
    assert not any(i.startswith("linear-*-float16") for i in native["intel"])  # avx512_fp16


def test_the_amx_attention_findings_hold_on_the_amx_host_only() -> None:
    """vLLM's bf16 attention takes its AMX path with _C on an AMX CPU: those entries hold on
    the Intel host in the vllm-cpu lane, and in the AVX2 lane on no host (the cap leaves no
    AMX flag, and the provider asks _C_AVX2 for its vec path there)."""
    amx = {"attention_prefill-causal-gqa-bfloat16-vllm-cpu]", "attention_*-bfloat16-vllm-cpu]"}
    assert amx <= applied("vllm-cpu", "intel")
    for host in ("zen4", "zen3"):
        assert not amx & applied("vllm-cpu", host)
    for host in HOSTS:
        assert not amx & applied("vllm-cpu-avx2", host)
