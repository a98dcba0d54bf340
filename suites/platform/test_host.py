"""The CPU, ISA flags, probe expectations and vendor libraries the matrix claims are real."""

from __future__ import annotations

import platform as _platform
import struct
import sys
from pathlib import Path

import pytest

from harness.platform.probe import AT_HWCAP, S390X_HWCAP

pytestmark = pytest.mark.tier("smoke")

# capability -> the CPU flag that proves it (x86)
X86_FLAGS = {"avx512_bf16": "avx512_bf16", "avx512_vnni": "avx512_vnni", "amx": "amx_bf16"}
# capability -> AT_HWCAP bit: the probe's table (s390x_vx <- vx, ...)
S390X_HWCAP_BITS = {f"s390x_{name}": bit for name, bit in S390X_HWCAP.items()}


def cpuinfo_flags() -> set[str]:
    """The CPU's flags as this process sees them (harness's one reader: /proc/cpuinfo, or
    CPUID where the lane's CPU is emulated and /proc/cpuinfo is the host's)."""
    from harness.platform.host import cpu_flags

    return set(cpu_flags())


def auxv_hwcap() -> int:
    """AT_HWCAP from /proc/self/auxv: right under qemu-user, where cpuinfo shows the host."""
    data = Path("/proc/self/auxv").read_bytes()
    for key, value in struct.iter_unpack("@QQ", data[: len(data) // 16 * 16]):
        if key == AT_HWCAP:
            return int(value)
    return 0


def claimed(platform, table) -> list[str]:
    return sorted(c for c in table if platform.has(c))


def test_machine_matches_arch(platform):
    if platform.family != "cpu":
        pytest.skip(f"{platform.name}: arch {platform.matrix.arch} is a device arch; see the probe")
    machine = _platform.machine()
    assert platform.matrix.arch[0] == machine, (
        f"{platform.name} declares arch {platform.matrix.arch[0]}, this machine is {machine}"
    )


def test_x86_isa_flags_claimed_are_present(platform):
    caps = claimed(platform, X86_FLAGS)
    if not caps:
        pytest.skip(f"{platform.name} claims no x86 ISA capability")
    flags = cpuinfo_flags()
    missing = [f"{c} (flag {X86_FLAGS[c]})" for c in caps if X86_FLAGS[c] not in flags]
    assert not missing, f"{platform.name} claims {', '.join(missing)}; the CPU lacks it"


@pytest.mark.requires("avx512_bf16")
def test_torch_sees_avx512_bf16():
    torch = pytest.importorskip("torch")
    assert torch.backends.cpu.get_cpu_capability() in ("AVX512", "AMX", "AVX512_BF16")
    assert torch.cpu._is_avx512_bf16_supported()


def test_s390x_facilities_claimed_are_present(platform):
    caps = claimed(platform, S390X_HWCAP_BITS)
    if not caps:
        pytest.skip(f"{platform.name} claims no s390x facility")
    hwcap = auxv_hwcap()
    missing = [c for c in caps if not hwcap >> S390X_HWCAP_BITS[c] & 1]
    assert not missing, f"{platform.name} claims {missing}; AT_HWCAP is {hwcap:#x}"


def test_probe_expectations(platform):
    expect = dict(platform.matrix.probe.expect)
    if platform.family != "cpu" and platform.emulate:
        pytest.skip(
            f"{platform.name}: the {platform.matrix.probe.kind} probe needs hardware "
            "(emulated on the CPU)"
        )
    from harness.platform.probe_local import probe_and_check

    probe_and_check(platform.matrix)  # raises, naming what was expected and found
    if "byteorder" in expect:
        assert sys.byteorder == expect["byteorder"]


@pytest.mark.requires("zentorch")
def test_zentorch_imports_and_matches_torch():
    torch = pytest.importorskip("torch")
    try:
        import zentorch
    except ImportError as error:  # the matrix claims it: missing is a failure, not a skip
        pytest.fail(f"the matrix provides zentorch but it does not import: {error}")
    zen = getattr(zentorch, "__version__", "")
    assert zen.split(".")[:2] == torch.__version__.split("+")[0].split(".")[:2], (
        f"zentorch {zen} was built for another torch than {torch.__version__}"
    )
    assert hasattr(torch.ops.zentorch, "zentorch_mm")


@pytest.mark.requires("triton")
def test_triton_kernel_runs(device):
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)

    x = torch.zeros(37, device=device)
    add_one[(2,)](x, 37, BLOCK=32)
    assert x.cpu().tolist() == [1.0] * 37


@pytest.mark.requires("gloo")
def test_gloo_backend_available():
    torch = pytest.importorskip("torch")
    assert torch.distributed.is_available() and torch.distributed.is_gloo_available()


@pytest.mark.requires("int8_gemm")
def test_int8_gemm(device):
    torch = pytest.importorskip("torch")
    a = torch.randint(-128, 127, (32, 64), dtype=torch.int8, device=device)
    b = torch.randint(-128, 127, (64, 32), dtype=torch.int8, device=device)
    got = torch._int_mm(a, b).cpu()
    want = a.cpu().to(torch.int32) @ b.cpu().to(torch.int32)
    assert got.dtype == torch.int32 and torch.equal(got, want)


@pytest.mark.tier("full")
@pytest.mark.requires("inductor")
def test_inductor_compiles(device):
    torch = pytest.importorskip("torch")
    fn = torch.compile(lambda x: torch.nn.functional.silu(x) * 2.0, dynamic=False)
    x = torch.linspace(-3, 3, 64, device=device)
    assert torch.allclose(fn(x), torch.nn.functional.silu(x) * 2.0, atol=1e-6, rtol=1e-6)
