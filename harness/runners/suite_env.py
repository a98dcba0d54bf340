"""The environment of a suite process, built here for every way one starts: ``harness run``
(locally or in a container), ``harness kernels`` in the matrix's interpreter and
``harness select --collect``'s collection."""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from pathlib import Path

from harness.matrix.model import Matrix
from harness.platform.cache import cache_env
from harness.platform.host import FOREIGN_ENV


def triton_interpreted(matrix: Matrix, *, emulate: bool) -> bool:
    """Triton kernels on the CPU run through Triton's interpreter, which must be chosen
    before triton is first imported."""
    return emulate or matrix.device == "cpu"


# docker's architecture names for what platform.machine() says
_DOCKER_ARCH = {"x86_64": "amd64", "AMD64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def foreign_arch(matrix: Matrix, machine: str | None = None) -> str | None:
    """The architecture of the lane's image where it is not the host's (``linux/s390x`` on
    an x86-64 host: qemu-user runs it), else None."""
    wanted = (matrix.runtime.platform or "").rpartition("/")[2]
    here = machine or platform.machine()
    if not wanted or wanted in (here, _DOCKER_ARCH.get(here)):
        return None
    return wanted


def suite_env(matrix: Matrix, root: Path, *, import_root: Path,
              inherited_pythonpath: str | None = None, emulate: bool = False,
              defaults: Mapping[str, str] | None = None,
              overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The project root (HARNESS_ROOT), where harness and refengine import from (PYTHONPATH,
    ahead of an inherited one), no bytecode written into the checkout, then ``defaults``
    (the run's thread settings and the like), the Triton interpreter where it is needed, the
    lane's architecture where the host's is another,
    the matrix's ``runtime.env``, its persistent caches, and last ``overrides``."""
    pythonpath = [str(import_root), *filter(None, [inherited_pythonpath])]
    env = {"HARNESS_ROOT": str(root), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join(pythonpath)}
    env.update(defaults or {})
    if triton_interpreted(matrix, emulate=emulate):
        env["TRITON_INTERPRET"] = "1"
    arch = foreign_arch(matrix)
    if arch:
        env[FOREIGN_ENV] = arch
    env.update(dict(matrix.runtime.env))
    env.update(cache_env(matrix))
    env.update(overrides or {})
    return env


def collection_env(matrix: Matrix, root: Path) -> dict[str, str]:
    """A lane's suites collected by pytest here (``harness select --collect``): the run's
    suite environment over this process's, less the agent's host-tuned CPU settings where
    the lane's CPU is emulated, Triton interpreted (collection needs no device)."""
    from harness.platform.cache import cache_root
    from harness.platform.cpu_emulation import lane_environ
    from harness.roots import import_path

    return lane_environ(matrix) | suite_env(
        matrix, root, import_root=import_path(cache_root(matrix)),
        inherited_pythonpath=os.environ.get("PYTHONPATH"), overrides={"TRITON_INTERPRET": "1"})
