"""What a run needs from the host, checked in well under a second, before anything is built.

``harness doctor [--matrix X]`` prints every check; ``harness run`` (and ``kernels``,
``repro``) runs the ones its plan needs first and stops with exit 3, one line per
missing thing with the command that installs it, before building an environment or
touching Docker.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import sys
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HostUnavailable, InfraError
from harness.matrix.model import Matrix
from harness.matrix.schema import CPU_FLAGS
from harness.platform.probe import CommandRunner
from harness.results.facts import probe_kind

# Shipped suites that compile with torch.compile (inductor builds C++ on the CPU).
COMPILING_SUITES = frozenset({"kernel_parity", "fusion", "e2e"})
MIN_PYTHON = (3, 11)


@dataclass(frozen=True, kw_only=True)
class Check:
    what: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True

    def line(self) -> str:
        if self.ok:
            return f"ok       {self.what}: {self.detail}"
        mark = "MISSING " if self.required else "optional"
        fix = f"; {self.fix}" if self.fix else ""
        return f"{mark} {self.what}: {self.detail}{fix}"


def _apt(*packages: str) -> str:
    sudo = "" if os.geteuid() == 0 else "sudo "
    return f"install: {sudo}apt-get install -y {' '.join(packages)}"


def check_python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info[:2] >= MIN_PYTHON
    need = ".".join(map(str, MIN_PYTHON))
    return Check(
        what="Python",
        ok=ok,
        detail=f"{version} ({sys.executable})" if ok else f"{version}; the harness needs {need}+",
        fix="" if ok else _apt(f"python{need}", f"python{need}-venv"),
    )


def check_venv() -> Check:
    """Building a matrix's environment needs venv with ensurepip (Debian: python3-venv)."""
    ok = importlib.util.find_spec("ensurepip") is not None
    return Check(
        what="venv with pip (builds the matrix's environment)",
        ok=ok,
        detail="ensurepip present" if ok else "no ensurepip in this Python",
        fix="" if ok else _apt("python3-venv"),
    )


def check_compiler() -> Check:
    name = os.environ.get("CXX") or "g++"
    found = shutil.which(name)
    return Check(
        what="C++ compiler (torch.compile / inductor builds C++ kernels)",
        ok=found is not None,
        detail=found or f"no {name} on PATH",
        fix="" if found else _apt("g++"),
    )


def check_headers() -> Check:
    include = Path(sysconfig.get_paths()["include"])
    header = include / "Python.h"
    ok = header.is_file()
    return Check(
        what="Python headers (inductor includes Python.h)",
        ok=ok,
        detail=str(header) if ok else f"no Python.h in {include}",
        fix="" if ok else _apt("python3-dev"),
    )


def check_docker(timeout: float = 2.0) -> Check:
    fix = "run ci/setup-host.sh (or " + _apt("docker.io")[9:] + " and start dockerd)"
    try:
        import docker
    except ImportError:
        return Check(what="Docker engine", ok=False, detail="no docker SDK",
                     fix="install: pip install docker")
    try:
        client = docker.from_env(timeout=int(max(1, timeout)))
        version = client.version().get("Version", "?")
    except Exception as error:  # the SDK raises many kinds; all mean "no engine"
        text = str(error)
        if "FileNotFoundError" in text or "No such file" in text:
            first = "no Docker socket"
        else:
            first = text.splitlines()[0][:60] if text else type(error).__name__
        return Check(what="Docker engine", ok=False, detail=f"not answering ({first})", fix=fix)
    return Check(what="Docker engine", ok=True, detail=f"version {version}")


def check_binfmt_s390x() -> Check:
    entry = Path("/proc/sys/fs/binfmt_misc/qemu-s390x")
    fix = _apt("qemu-user-static", "binfmt-support") + " && update-binfmts --enable qemu-s390x"
    try:
        text = entry.read_text()
    except OSError:
        return Check(what="qemu + binfmt for s390x images", ok=False,
                     detail=f"{entry} absent", fix=fix)
    flags = next((ln.split(":", 1)[1].strip() for ln in text.splitlines()
                  if ln.startswith("flags:")), "")
    ok = text.startswith("enabled") and "F" in flags
    return Check(
        what="qemu + binfmt for s390x images",
        ok=ok,
        detail=f"{entry} enabled, flags {flags}" if ok else f"{entry}: not enabled with flag F",
        fix="" if ok else fix,
    )


def check_chromium() -> Check:
    found = next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p),
        None,
    )
    return Check(
        what="Chromium (the HTML report's browser tests)",
        ok=found is not None,
        detail=found or "not on PATH",
        fix="" if found else _apt("chromium"),
        required=False,
    )


def _drm_vendors() -> set[str]:
    vendors = set()
    for path in glob.glob("/sys/class/drm/renderD*/device/vendor"):
        try:
            vendors.add(Path(path).read_text().strip().lower())
        except OSError:
            continue
    return vendors


def _nvidia_nodes() -> tuple[bool, str]:
    nodes = glob.glob("/dev/nvidia[0-9]*")
    return bool(nodes), (", ".join(nodes[:2]) if nodes else "no /dev/nvidia0")


def _rocm_driver() -> tuple[bool, str]:
    ok = Path("/dev/kfd").exists()
    return ok, "/dev/kfd present" if ok else "no /dev/kfd (the ROCm kernel driver)"


def _intel_render_node() -> tuple[bool, str]:
    ok = "0x8086" in _drm_vendors()
    return ok, "an Intel render node" if ok else "no Intel render node in /dev/dri"


# How each GPU probe kind's device shows in /dev (a GPU kind without one here is an error,
# tests/unit/test_doctor_devices.py); the other kinds have no device to look for.
DEVICE_FILES: dict[str, Callable[[], tuple[bool, str]]] = {
    "nvidia-smi": _nvidia_nodes,
    "amd-smi": _rocm_driver,
    "xpu-smi": _intel_render_node,
}


def device_present(kind: str) -> tuple[bool, str]:
    """Is the matrix's device on this host? Files only: no driver call, no Docker."""
    look = DEVICE_FILES.get(kind)
    return look() if look else (True, "no device to probe")


def check_device(matrix: Matrix) -> Check:
    kind = matrix.probe.kind
    label = probe_kind(kind).device
    ok, detail = device_present(kind)
    return Check(
        what=f"{label} for matrix {matrix.name}",
        ok=ok,
        detail=detail if ok else f"no {label} here ({detail})",
        fix="" if ok else f"use --emulate to run the {matrix.name} profile on this CPU",
    )


def require_device(matrix: Matrix, *, command: str) -> None:
    """Exit 3 in one line when a GPU matrix's GPU is absent, pointing at --emulate."""
    if not probe_kind(matrix.probe.kind).gpu:
        return
    ok, detail = device_present(matrix.probe.kind)
    if not ok:
        raise HostUnavailable(
            f"no {probe_kind(matrix.probe.kind).device} here ({detail}); to run the "
            f"{matrix.name} profile on this CPU: {command} --emulate"
        )


def cpu_expectations(matrix: Matrix) -> dict[str, object]:
    """What a CPU matrix's probe asks of the host CPU (zen: vendor and flags), if anything."""
    if matrix.probe.kind != "lscpu":
        return {}
    return {k: v for k, v in matrix.probe.expect.items() if k != "min_devices"}


def check_cpu_probe(matrix: Matrix, run: CommandRunner | None = None) -> Check:
    """The matrix's own probe on this CPU: the check ``harness run`` makes before building.
    ``run``: where its commands run (default: here)."""
    from harness.platform.probe_local import probe_and_check

    what = f"CPU for matrix {matrix.name}"
    try:
        fingerprint = probe_and_check(matrix, run)
    except InfraError as error:
        return Check(what=what, ok=False, detail=str(error),
                     fix=f"use --emulate to run the {matrix.name} profile on this CPU")
    return Check(what=what, ok=True, detail=f"{fingerprint.vendor}, "
                 f"{fingerprint.model or 'model unknown'}: the probe's expectations hold")


def check_cpu_emulation(matrix: Matrix) -> Check:
    """A lane with an emulated CPU: qemu-user here, the model one it can be, and what CPUID
    answers inside it (the flags the lane's known failures and kernels see)."""
    from harness.errors import HarnessError
    from harness.platform.cpu_emulation import facts

    what = f"emulated CPU for matrix {matrix.name} ({matrix.cpu.emulated})"
    try:
        found = facts(matrix.cpu)
    except HarnessError as error:
        # The error is its own fix: a missing qemu's line names the command that installs
        # it (cpu_emulation.qemu), and installing qemu mends none of the others.
        return Check(what=what, ok=False, detail=str(error))
    flags = [f for f in CPU_FLAGS if f in found["flags"]]  # type: ignore[operator]
    return Check(what=what, ok=True, detail=f"qemu-user -cpu {found['option']}: CPUID "
                 f"{found['vendor']} {found['model']}, flags {' '.join(flags) or 'none'} "
                 "of those harness reads")


def run_checks(
    matrix: Matrix | None,
    *,
    emulate: bool = False,
    docker: bool = False,
    build_venv: bool = True,
    suites: Sequence[str] = (),
    probe_cpu: bool = True,
) -> list[Check]:
    """The checks a run of ``matrix`` (or, without one, a first run of any) needs.
    ``probe_cpu``: include the CPU matrix's probe (``harness run`` probes it itself, to
    keep the fingerprint)."""
    checks = [check_python()]
    if matrix is not None and not emulate and probe_kind(matrix.probe.kind).gpu:
        checks.append(check_device(matrix))
        if not checks[-1].ok:
            return checks  # nothing else matters until there is a device (or --emulate)
    if matrix is not None and not emulate and not docker and probe_cpu \
            and cpu_expectations(matrix):
        checks.append(check_cpu_probe(matrix))
    if matrix is not None and matrix.cpu.emulated is not None:
        checks.append(check_cpu_emulation(matrix))
    if docker:
        checks.append(check_docker())
        if matrix is not None and (matrix.runtime.platform or "").endswith("s390x"):
            checks.append(check_binfmt_s390x())
        return checks
    if build_venv:
        checks.append(check_venv())
    compiles = matrix is None or (
        matrix.capabilities.has("inductor", emulate=emulate)
        and any(s in COMPILING_SUITES for s in suites)
    )
    if compiles:
        checks += [check_compiler(), check_headers()]
    return checks


def preflight(checks: list[Check]) -> None:
    """Raise InfraError (exit 3) with one line per missing required thing."""
    missing = [c for c in checks if c.required and not c.ok]
    if missing:
        lines = [c.line() for c in missing]
        lines.append("nothing was built; `harness doctor` lists every check")
        raise InfraError("host is missing what this run needs:\n" + "\n".join(lines))
