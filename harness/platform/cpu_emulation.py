"""A lane's emulated CPU: every process of its suites runs as another x86-64 CPU under
qemu-user, on any x86-64 agent (the matrix's ``cpu: {emulated: ...}``).

vLLM's CPU build picks its kernel library, and vLLM's tests what they run, from the CPU
they see (CPUID, through torch's cpuinfo); so an AVX2-only host's findings exist only on
an AVX2-only agent, unless the lane brings its CPU with it. The lane's interpreter is a
wrapper in its environment's ``bin/`` that re-enters qemu with ``-0 "$0"``: the emulated
Python's ``sys.executable`` is the wrapper, so every child it starts with it (xdist
workers, subprocesses, multiprocessing's spawn and forkserver, the gloo ranks) is emulated
too, and a fork stays inside qemu. Inside, ``/proc/cpuinfo`` is the host's file: the
facts harness records and matches come from CPUID (platform/cpuid.py), and the wrapper
sets ``HARNESS_EMULATED_CPU`` so that platform/host.py knows to ask it.

qemu's TCG has no AVX-512: a model whose features it would drop (qemu warns "TCG doesn't
support requested feature") is refused when they are AVX-512 or AMX, and its other dropped
features (pcid, x2apic: nothing a kernel library reads) are turned off in the model's
option, so qemu runs quietly and exactly the CPU it says.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from harness.errors import ConfigError, InfraError, UsageError
from harness.matrix.model import CPU_LEVELS, Cpu, Matrix
from harness.platform.cpu_tuning import host_tuned
from harness.platform.host import EMULATED_ENV
from harness.process.run import run_captured

QEMU = ("qemu-x86_64-static", "qemu-x86_64")
INSTALL = "apt-get install -y qemu-user-static"
MARCH_ENV = "TORCHINDUCTOR_CPP_MARCH"  # inductor's -march (default: native)
_DROPPED = re.compile(r"TCG doesn't support requested feature: \S*?\.([\w.-]+) \[bit")
_NO_TCG = ("avx512", "amx")
CPUID_SCRIPT = Path(__file__).with_name("cpuid.py")
TIMEOUT_S = 120.0


def qemu() -> str:
    """qemu-user's x86-64 emulator, or InfraError (exit 3) with the command that installs
    it; an emulated x86-64 CPU needs an x86-64 agent (UsageError elsewhere)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        raise UsageError(f"an emulated x86-64 CPU runs on an x86-64 agent, not "
                         f"{platform.machine()} (qemu-user emulates a CPU of the host's own "
                         "architecture here; run this lane on an x86-64 agent)")
    for name in QEMU:
        found = shutil.which(name)
        if found:
            return found
    raise InfraError(f"qemu-user is not installed (the lane's CPU is emulated): {INSTALL}; "
                     "nothing was run")


@functools.cache
def models(emulator: str) -> frozenset[str]:
    """The CPU models this qemu knows (``-cpu help``)."""
    done = run_captured([emulator, "-cpu", "help"], timeout_s=TIMEOUT_S)
    return frozenset(line.split()[1] for line in done.stdout.splitlines()
                     if line.startswith("x86 ") and len(line.split()) > 1)


@functools.cache
def dropped(emulator: str, model: str) -> tuple[str, ...]:
    """The features of ``model`` qemu's TCG cannot give (it warns and drops them)."""
    done = run_captured([emulator, "-cpu", model, sys.executable, "-c", ""],
                        timeout_s=TIMEOUT_S)
    return tuple(dict.fromkeys(_DROPPED.findall(done.stderr)))


def cpu_option(cpu: Cpu, emulator: str) -> str:
    """``-cpu``'s value for the lane: the model, less what TCG would drop; a model qemu
    does not know, or one that needs AVX-512 or AMX, is a ConfigError in one line."""
    model = cpu.model
    assert model is not None
    if model not in models(emulator):
        known = ", ".join(sorted(m for m in models(emulator) if "-v" in m)[:12])
        raise ConfigError(f"{model!r} is no CPU model of {Path(emulator).name} (some: "
                          f"{known}, ...; or a level: x86-64-v2, x86-64-v3)",
                          key="cpu.emulated")
    lost = dropped(emulator, model)
    beyond = [f for f in lost if f.startswith(_NO_TCG)]
    if beyond:
        raise ConfigError(f"{model}: qemu's TCG cannot emulate {', '.join(beyond[:4])}"
                          f"{', ...' if len(beyond) > 4 else ''} (AVX-512 and AMX CPUs stay "
                          "with real agents)", key="cpu.emulated")
    return ",".join([model, *(f"-{f}" for f in lost)])


def left_out(matrix: Matrix, given: Iterable[str] = (),
             environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The agent's host-tuned CPU settings (platform/cpu_tuning.py) that the lane's processes
    do not inherit, with their values: on a lane with an emulated CPU, all that ``environ``
    sets but those the lane sets itself (its ``runtime.env``, and ``given``: the run's own);
    none on the agent's own CPU."""
    if matrix.cpu.emulated is None:
        return {}
    return host_tuned(environ, lane={*matrix.runtime.env, *given})


def lane_environ(matrix: Matrix, given: Iterable[str] = (),
                 environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``environ`` as the lane's processes inherit it: less what ``left_out`` finds."""
    left = left_out(matrix, given, environ)
    return {k: v for k, v in environ.items() if k not in left}


def describe_left_out(found: Mapping[str, str]) -> str:
    """The run's line for what ``left_out`` found ("" for nothing)."""
    if not found:
        return ""
    settings = ", ".join(f"{name}={value}" for name, value in found.items())
    return (f"cpu: this agent's {settings} left out (host-tuned, not the emulated CPU's; "
            "the matrix's runtime.env gives the lane its own)")


def wrapper_path(python: str, cpu: Cpu) -> Path:
    return Path(python).parent / f"python-cpu-{cpu.model}"


def wrap(python: str, cpu: Cpu, *, write: bool = True) -> str:
    """The lane's interpreter: a wrapper beside ``python`` (in its environment's bin/,
    so the emulated Python finds its environment) that runs it on the emulated CPU."""
    emulator = qemu()
    option = cpu_option(cpu, emulator)
    target = Path(shutil.which(python) or python)  # a name on PATH: its path, links kept
    path = wrapper_path(str(target), cpu)
    if not write:
        return str(path)
    # A compiler the emulated process starts (inductor's g++) runs on the agent's CPU, and
    # inductor asks it for -march=native: code for the agent's CPU (AVX-512 on an AVX-512
    # agent), an illegal instruction on the lane's. Its -march is the lane's level instead.
    text = (f"#!/bin/sh\n# harness: {Path(python).name} on an emulated {option} "
            f"(qemu-user); its children stay on it (sys.executable is this file)\n"
            f"{EMULATED_ENV}={cpu.model}\nexport {EMULATED_ENV}\n"
            f': "${{{MARCH_ENV}:={march(cpu)}}}"\nexport {MARCH_ENV}\n'
            f'exec {emulator} -cpu {option} -0 "$0" "{target}" "$@"\n')
    if not path.is_file() or path.read_text() != text:
        scratch = path.with_name(path.name + ".tmp")
        scratch.write_text(text)
        scratch.chmod(0o755)
        scratch.replace(path)
    return str(path)


# gcc's x86-64 levels, highest first, by the CPUID flags each needs beyond the one below
_LEVELS = (("x86-64-v3", {"avx2", "avx", "fma", "bmi1", "bmi2", "movbe", "f16c"}),
           ("x86-64-v2", {"sse4_2", "sse4_1", "ssse3", "popcnt"}))


def march(cpu: Cpu) -> str:
    """The compilers' ``-march`` for the lane's CPU: its level, or the highest x86-64
    level its CPUID flags reach."""
    if cpu.emulated in CPU_LEVELS:
        return cpu.emulated
    flags = set(facts(cpu)["flags"])  # type: ignore[call-overload]
    return next((level for level, needs in _LEVELS if needs <= flags), "x86-64")


@functools.cache
def _facts(model: str) -> str:
    emulator = qemu()
    argv = [emulator, "-cpu", cpu_option(Cpu(emulated=model), emulator), sys.executable,
            str(CPUID_SCRIPT)]
    try:
        done = run_captured(argv, timeout_s=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InfraError(f"the emulated {model}: CPUID could not be read: {error}") from None
    if done.returncode != 0:
        raise InfraError(f"the emulated {model}: CPUID could not be read: "
                         f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    return done.stdout


def facts(cpu: Cpu) -> dict[str, object]:
    """What CPUID answers inside the emulation ({vendor, model, flags}, and qemu's
    ``option``), asked with this interpreter (the facts do not depend on the lane's
    environment)."""
    assert cpu.model is not None
    found: dict[str, object] = json.loads(_facts(cpu.model))
    found["option"] = cpu_option(cpu, qemu())
    return found
