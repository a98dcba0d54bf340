"""platform/cpuid.py: the CPU as CPUID answers it, named as Linux names it, against the
programs that read the same facts: the kernel's /proc/cpuinfo and util-linux's ``lscpu -J``
on this machine's own CPU, qemu-user's models for the emulated levels (whose CPUID is
qemu's, while /proc/cpuinfo stays the host's), and the lscpu probe's parser, which reads
the script's output. On any x86-64 host; the flags compared are those the host has."""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.matrix.model import Cpu
from harness.platform import cpu_emulation, cpuid
from harness.platform.probe import parse_lscpu

X86 = platform.machine() in ("x86_64", "AMD64")
pytestmark = pytest.mark.skipif(not X86, reason="CPUID is an x86-64 instruction")
SCRIPT = Path(cpuid.__file__)
# the x86-64 levels' models as qemu's TCG runs them: every flag CPUID names there
NEHALEM = ["pni", "popcnt", "sse", "sse2", "sse4_1", "sse4_2", "ssse3"]
HASWELL = sorted([*NEHALEM, "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe"])
# the flags qemu's TCG can take away (Linux's name: qemu's): each alone, but SSE4.1 and BMI1
# (glibc's string functions, chosen by the rest, use them: SIGILL), which go with the
# flags that lean on them; SSE and SSE2 stay (x86-64 code needs them); AVX-512 and AMX
# TCG cannot give at all
TCG = {"pni": "pni", "ssse3": "ssse3", "fma": "fma", "sse4_2": "sse4.2", "movbe": "movbe",
       "popcnt": "popcnt", "avx": "avx", "f16c": "f16c", "avx2": "avx2", "bmi2": "bmi2"}
TOGETHER = {"sse4_1": "sse4.1", "sse4_2": "sse4.2", "movbe": "movbe", "popcnt": "popcnt",
            "avx": "avx", "f16c": "f16c", "bmi1": "bmi1"}
# the flags TCG cannot give (Linux's name: qemu's): qemu names the CPUID bit of each it drops
NO_TCG = {"avx512f": "avx512f", "avx512dq": "avx512dq", "avx512ifma": "avx512ifma",
          "avx512cd": "avx512cd", "avx512bw": "avx512bw", "avx512vl": "avx512vl",
          "avx512vbmi": "avx512vbmi", "avx512_vbmi2": "avx512vbmi2",
          "avx512_vnni": "avx512vnni", "avx512_bitalg": "avx512bitalg",
          "avx512_vpopcntdq": "avx512-vpopcntdq", "amx_bf16": "amx-bf16",
          "avx512_fp16": "avx512-fp16", "amx_tile": "amx-tile", "amx_int8": "amx-int8",
          "avx_vnni": "avx-vnni", "avx512_bf16": "avx512-bf16", "amx_fp16": "amx-fp16"}
# a model whose CPUID stops at leaf 7 and at the brand string's last leaf, with a brand
# string of all 48 characters: each leaf harness reads is the last one there is
BRAND = "Harness test CPU: its brand string all 48 chars."
EDGE = f"Haswell-v4,level=7,xlevel=0x80000004,model-id={BRAND}"
QEMU = shutil.which("qemu-x86_64-static")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields, as the kernel writes them."""
    first = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
    return {k.strip(): v.strip() for k, _, v in (line.partition(":")
                                                 for line in first.splitlines())}


def test_this_cpus_flags_are_the_kernels_by_the_kernels_names() -> None:
    found = cpuid.facts()
    kernel = _cpuinfo()
    linux = set(kernel["flags"].split())
    assert found["flags"] == sorted(linux & set(cpuid.FLAGS.values()))
    assert found["vendor"] == kernel["vendor_id"]
    assert found["model"] == kernel["model name"]


@pytest.mark.skipif(shutil.which("lscpu") is None, reason="util-linux's lscpu is not here")
def test_the_script_prints_what_the_probe_reads_of_lscpu_itself() -> None:
    """``python cpuid.py --lscpu`` (as the lscpu probe runs it in a lane's interpreter),
    parsed by the probe, says what ``lscpu -J`` says of this CPU."""
    done = subprocess.run([sys.executable, str(SCRIPT), "--lscpu"], capture_output=True,
                          text=True, check=True, timeout=60)
    ours = parse_lscpu(done.stdout)
    theirs = parse_lscpu(subprocess.run(["lscpu", "-J"], capture_output=True, text=True,
                                        check=True, timeout=60).stdout)
    for key in ("vendor", "model", "arch", "kind", "byteorder"):
        assert ours[key] == theirs[key], key
    assert ours["flags"] == sorted(set(theirs["flags"]) & set(cpuid.FLAGS.values()))
    plain = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                           check=True, timeout=60)
    assert json.loads(plain.stdout) == cpuid.facts()


@pytest.mark.skipif(shutil.which("qemu-x86_64-static") is None,
                    reason="qemu-user-static is not installed (ci/setup-host.sh)")
@pytest.mark.parametrize(("level", "model", "flags"), [
    ("x86-64-v2", "Nehalem-v2", NEHALEM), ("x86-64-v3", "Haswell-v4", HASWELL)])
def test_an_emulated_level_answers_as_its_model(level: str, model: str,
                                                flags: list[str]) -> None:
    """Under qemu-user CPUID is the model's: each level's flags exactly, whatever the host's
    (its /proc/cpuinfo, read through the same qemu, stays the host's)."""
    found = cpu_emulation.facts(Cpu(emulated=level))
    assert found["flags"] == flags
    assert found["vendor"] == "GenuineIntel" and model.split("-")[0] in str(found["model"])


def _under_qemu(options: list[str]) -> list[dict[str, object]]:
    """``cpuid.py`` under qemu-user once per ``-cpu`` option, the processes side by side."""
    assert QEMU is not None
    procs = [subprocess.Popen([QEMU, "-cpu", option, sys.executable, str(SCRIPT)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for option in options]
    outs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outs
    return [json.loads(out) for out in outs]


@pytest.mark.skipif(QEMU is None, reason="qemu-user-static is not installed (ci/setup-host.sh)")
def test_each_flag_is_its_own_bit_and_each_leaf_is_read_to_the_last() -> None:
    """Each flag TCG can take away, taken away, goes from CPUID's answer alone (a flag read
    from another flag's bit shows: one of the two runs disagrees); on a model whose leaves
    end at 7 and at the brand string's last, every flag and all 48 characters are read."""
    alone = [{name} for name in TCG]
    options = [EDGE, *(EDGE + f",-{TCG[name]}" for name in TCG),
               EDGE + "".join(f",-{q}" for q in TOGETHER.values()),
               "Haswell-v4,level=1,xlevel=0x80000002"]
    edge, *taken_away, together, top_1 = _under_qemu(options)
    assert edge["flags"] == HASWELL and edge["model"] == BRAND and len(BRAND) == 48
    for taken, found in zip([*alone, set(TOGETHER)], [*taken_away, together], strict=True):
        assert found["flags"] == sorted(set(HASWELL) - taken), taken
    # leaf 7 is past the top: none of its flags; the brand string's first 16 characters
    assert top_1["flags"] == sorted(set(HASWELL) - {"avx2", "bmi1", "bmi2"})
    assert top_1["model"] == "Intel Core Proce"


@pytest.mark.skipif(QEMU is None, reason="qemu-user-static is not installed (ci/setup-host.sh)")
def test_each_flag_tcg_cannot_give_is_where_qemus_table_puts_it() -> None:
    """AVX-512 and AMX: no emulated CPU has them, and a host that has two of them cannot
    tell their bits apart; qemu's own feature table can ("TCG doesn't support requested
    feature: CPUID.07H:EBX.avx512f [bit 16]" for each it drops; its leaf 7 EAX word is
    subleaf 1's). Each flag this qemu knows, where ours is."""
    assert QEMU is not None
    known = subprocess.run([QEMU, "-cpu", "help"], capture_output=True, text=True,
                           timeout=60).stdout.split("Recognized CPUID flags:")[1].split()
    asked = {name: q for name, q in NO_TCG.items() if q in known}
    done = subprocess.run([QEMU, "-cpu", "Haswell-v4" + "".join(f",+{q}" for q in
                                                                asked.values()), "/bin/true"],
                          capture_output=True, text=True, timeout=60)
    regs = {"EAX": 0, "EBX": 1, "ECX": 2, "EDX": 3}
    theirs = {}
    for leaf, reg, name, bit in re.findall(
            r"TCG doesn't support requested feature: CPUID\.(\w+)H:(E[ABCD]X)\.([\w-]+) "
            r"\[bit (\d+)\]", done.stderr):
        sub = 1 if (leaf, reg) == ("07", "EAX") else 0  # leaf 7's EAX: the count of subleaves
        theirs[name] = (int(leaf, 16), sub, regs[reg], int(bit))
    ours = {name: key for key, name in cpuid.FLAGS.items()}
    assert {name: theirs.get(q) for name, q in asked.items()} == {
        name: ours[name] for name in asked}
    assert len(asked) >= len(NO_TCG) - 1  # amx_fp16: qemu 8 and later


def test_off_x86_64_there_is_no_cpuid_to_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "s390x")
    monkeypatch.setattr(platform, "processor", lambda: "IBM/S390")
    assert cpuid.facts() == {"vendor": "", "model": "IBM/S390", "flags": []}
    monkeypatch.setattr(platform, "machine", lambda: "AMD64")
    assert cpuid.facts()["flags"] == sorted(set(_cpuinfo()["flags"].split())
                                            & set(cpuid.FLAGS.values()))


def test_the_lscpu_form_has_the_four_fields_the_probe_reads() -> None:
    found = {"vendor": "AuthenticAMD", "model": "AMD EPYC 9B45", "flags": ["avx", "avx2"]}
    text = cpuid.as_lscpu(found)
    assert json.loads(text) == {"lscpu": [
        {"field": "Architecture:", "data": platform.machine()},
        {"field": "Vendor ID:", "data": "AuthenticAMD"},
        {"field": "Model name:", "data": "AMD EPYC 9B45"},
        {"field": "Flags:", "data": "avx avx2"}]}
    parsed = parse_lscpu(text)
    assert (parsed["vendor"], parsed["model"], parsed["flags"]) == (
        "AuthenticAMD", "AMD EPYC 9B45", ["avx", "avx2"])
