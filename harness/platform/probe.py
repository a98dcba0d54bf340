"""Device probes: what hardware the container actually sees, checked against the matrix.

Parsers are pure functions over the tools' machine-readable output (tested on captured
outputs); ``TOOLS`` says what each kind runs and parses; ``check`` compares a
fingerprint with the matrix's ``probe.expect`` and raises InfraError naming the gap.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from harness.errors import InfraError
from harness.results.facts import DeviceFingerprint, probe_kind

NVIDIA_QUERY = "index,name,uuid,memory.total,compute_cap,driver_version"
NVIDIA_FALLBACK = "index,name,uuid,memory.total,driver_version"  # R470-era drivers
# AT_HWCAP bits of the s390x vector facilities (arch/s390/include/asm/elf.h).
S390X_HWCAP = {"vx": 11, "vxe": 13, "vxe2": 15, "nnpa": 20}
AT_HWCAP = 16
# Runs inside the container: machine, byte order and AT_HWCAP as JSON. Under
# qemu-user /proc/cpuinfo shows the host's CPU, but auxv is the emulated one's.
S390X_SCRIPT = (
    "import json,platform,struct,sys\n"
    "raw=open('/proc/self/auxv','rb').read()\n"
    "f='@QQ' if struct.calcsize('P')==8 else '@II'\n"
    "n=struct.calcsize(f)\n"
    "pairs=[struct.unpack_from(f,raw,i) for i in range(0,len(raw)-n+1,n)]\n"
    "hw=next((v for k,v in pairs if k==16),0)\n"
    "print(json.dumps({'machine':platform.machine(),'byteorder':sys.byteorder,'hwcap':hw}))\n"
)


class Fingerprint(TypedDict, total=False):
    """What a parser reads of its tool's output; the keys differ by probe kind."""

    kind: str
    vendor: str
    model: str
    devices: list[dict[str, object]]  # a GPU tool's, one per device
    device_count: int
    arch: list[str]
    cpus: int | None
    flags: list[str]
    byteorder: str
    hwcap: int


class _LscpuEntry(TypedDict, total=False):
    """One entry of ``lscpu -J``: newer releases nest children under an entry."""

    field: str
    data: str | None
    children: list[_LscpuEntry]

def parse_nvidia_smi(text: str) -> Fingerprint:
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    gpus = []
    for row in rows:
        cells = [c.strip() for c in row]
        if len(cells) == 6:
            index, name, uuid, mem, cap, driver = cells
        elif len(cells) == 5:
            index, name, uuid, mem, driver = cells
            cap = ""
        else:
            raise InfraError(f"probe: cannot read nvidia-smi output line {row!r}")
        gpus.append({"index": int(index), "name": name, "uuid": uuid,
                     "memory_mib": int(float(mem)) if mem.replace(".", "").isdigit() else None,
                     "compute_cap": cap if cap and cap != "[N/A]" else None,
                     "driver": driver})
    archs = sorted({"sm_" + str(g["compute_cap"]).replace(".", "") for g in gpus
                    if g["compute_cap"]})
    return {"kind": "nvidia-smi", "vendor": "NVIDIA", "devices": gpus,
            "device_count": len(gpus), "arch": archs}


def parse_amd_smi(text: str) -> Fingerprint:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InfraError(f"probe: amd-smi printed no JSON ({error})") from None
    # ROCm 7 wraps the list in {"gpu_data": [...]}; older releases print the bare list.
    items = data.get("gpu_data", []) if isinstance(data, dict) else data
    gpus = []
    for item in items or []:
        asic = item.get("asic", {}) or {}
        vram = item.get("vram", {}) or {}
        size = vram.get("size", {})
        mem = size.get("value") if isinstance(size, dict) else size
        gpus.append({"index": item.get("gpu"), "name": asic.get("market_name"),
                     "arch": asic.get("target_graphics_version"),
                     "device_id": asic.get("device_id"),
                     "memory_mib": int(str(mem)) if str(mem).isdigit() else None})
    archs = sorted({str(g["arch"]) for g in gpus if g["arch"]})
    return {"kind": "amd-smi", "vendor": "AMD", "devices": gpus, "device_count": len(gpus),
            "arch": archs}


def parse_xpu_smi(text: str) -> Fingerprint:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InfraError(f"probe: xpu-smi printed no JSON ({error})") from None
    gpus = [{"index": d.get("device_id"), "name": d.get("device_name"),
             "pci_device_id": d.get("pci_device_id"), "drm": d.get("drm_device"),
             "uuid": d.get("uuid")} for d in data.get("device_list", [])]
    return {"kind": "xpu-smi", "vendor": "Intel", "devices": gpus, "device_count": len(gpus),
            "arch": sorted({str(g["pci_device_id"]) for g in gpus if g["pci_device_id"]})}


def parse_lscpu(text: str) -> Fingerprint:
    try:
        fields = json.loads(text)["lscpu"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise InfraError(f"probe: cannot read lscpu -J output ({error})") from None
    values: dict[str, str] = {}

    def walk(entries: list[_LscpuEntry]) -> None:  # newer lscpu nests children
        for entry in entries:
            values[str(entry.get("field", "")).rstrip(":")] = str(entry.get("data") or "")
            walk(entry.get("children", []))

    walk(fields)
    return {"kind": "lscpu", "vendor": values.get("Vendor ID", ""),
            "model": values.get("Model name", ""), "arch": [values.get("Architecture", "")],
            "cpus": int(values["CPU(s)"]) if values.get("CPU(s)", "").isdigit() else None,
            "flags": sorted(values.get("Flags", "").split()), "device_count": 0,
            "byteorder": "big" if "Big" in values.get("Byte Order", "") else "little"}


def s390x_features(hwcap: int) -> list[str]:
    return [name for name, bit in S390X_HWCAP.items() if hwcap & (1 << bit)]


def parse_s390x(text: str) -> Fingerprint:
    try:
        data = json.loads(text.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError) as error:
        raise InfraError(f"probe: cannot read the s390x probe output ({error})") from None
    return {"kind": "s390x", "arch": [data["machine"]], "byteorder": data["byteorder"],
            "hwcap": int(data["hwcap"]), "flags": s390x_features(int(data["hwcap"])),
            "device_count": 0}


@dataclass(frozen=True, kw_only=True)
class ProbeTool:
    """How one probe kind (``results/facts.py PROBE_KINDS``, every kind but "none") runs:
    its commands, tried in turn, and the parser of the first that answers."""

    commands: list[list[str]]
    parse: Callable[[str], Fingerprint]


TOOLS: Mapping[str, ProbeTool] = {
    "nvidia-smi": ProbeTool(commands=[
        ["nvidia-smi", f"--query-gpu={NVIDIA_QUERY}", "--format=csv,noheader,nounits"],
        ["nvidia-smi", f"--query-gpu={NVIDIA_FALLBACK}", "--format=csv,noheader,nounits"],
    ], parse=parse_nvidia_smi),
    "amd-smi": ProbeTool(commands=[["amd-smi", "static", "--asic", "--vram", "--json"]],
                         parse=parse_amd_smi),
    "xpu-smi": ProbeTool(commands=[["xpu-smi", "discovery", "-j"]], parse=parse_xpu_smi),
    "lscpu": ProbeTool(commands=[["lscpu", "-J"]], parse=parse_lscpu),
    "s390x": ProbeTool(commands=[["python3", "-c", S390X_SCRIPT]], parse=parse_s390x),
}


class ProbeFailed(InfraError):
    """No command of the probe answered (unlike a fingerprint that contradicts the matrix)."""


class ProbeRefused(InfraError):
    """The probe answered and this host is not the matrix's: an expectation it does not
    meet (what ``harness run --skip-unavailable`` records as skipped; a probe that could
    not run or be read is an infrastructure failure, never this)."""


# Runs one probe command where the probe runs (here, or in the container): its exit code
# (0 when it answered) and its output, or why it could not run.
CommandRunner = Callable[[list[str]], tuple[int, str]]


def probe(kind: str, expect: Mapping[str, Any], run: CommandRunner) -> DeviceFingerprint:
    """The one probe walk: the kind's commands in turn until one answers, its output parsed
    and checked against ``expect``, as the run record's ``DeviceFingerprint``. ProbeFailed
    with the last reason when none answers."""
    if kind in ("none", ""):
        return DeviceFingerprint({"kind": "none"})
    last = ""
    tool = TOOLS[kind]
    for argv in tool.commands:
        code, text = run(argv)
        if code == 0:
            fingerprint = tool.parse(text)
            check(kind, expect, fingerprint)
            return DeviceFingerprint(fingerprint)
        last = text
    raise ProbeFailed(f"probe {kind}: {last}")


def check(kind: str, expect: Mapping[str, Any], fingerprint: Fingerprint) -> None:
    """Raise ProbeRefused naming the first expectation the fingerprint does not meet."""
    count = int(fingerprint.get("device_count", 0))
    want = expect.get("min_devices")
    if want is not None and count < int(want):
        what = probe_kind(kind).device
        found = "none" if count == 0 else str(count)
        raise ProbeRefused(f"probe: expected {want} {what}{'s' if int(want) > 1 else ''}, "
                           f"found {found}")
    arch = expect.get("arch")
    found_arch = [a for a in fingerprint.get("arch", []) if a]
    if arch and arch not in found_arch:
        raise ProbeRefused(f"probe: expected arch {arch}, "
                           f"found {', '.join(found_arch) or 'none'}")
    cap = expect.get("compute_cap")
    if cap:
        caps = {d.get("compute_cap") for d in fingerprint.get("devices", [])}
        if cap not in caps:
            found = ", ".join(sorted(str(c) for c in caps if c)) or "none"
            raise ProbeRefused(f"probe: expected compute capability {cap}, found {found}")
    vendor = expect.get("vendor")
    if vendor and vendor != fingerprint.get("vendor"):
        raise ProbeRefused(f"probe: expected CPU vendor {vendor}, "
                           f"found {fingerprint.get('vendor') or 'none'}")
    missing = [f for f in expect.get("cpu_flags", []) if f not in fingerprint.get("flags", [])]
    if missing:
        raise ProbeRefused(f"probe: expected CPU flags {', '.join(missing)}, not reported")
    order = expect.get("byteorder")
    if order and fingerprint.get("byteorder") and order != fingerprint["byteorder"]:
        raise ProbeRefused(f"probe: expected byte order {order}, "
                           f"found {fingerprint['byteorder']}")
