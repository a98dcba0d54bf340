"""What a suite's container looks like, from the matrix runtime: one spec, two renderings.

``sdk_options`` feeds the docker SDK (``containers.create``); ``cli_args`` gives the
same container as a pasteable ``docker run`` line (``harness run --docker --dry-run``).
Keeping both on one spec is what makes the printed line a faithful repro.
"""

from __future__ import annotations

import grp
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.platform.cache import cache_root
from harness.process.secret_names import is_secret

if TYPE_CHECKING:
    from harness.matrix.model import Matrix
    from harness.runners.invocation import Invocation

# Host variables always passed through besides the matrix's runtime.env_allowlist.
HARNESS_ALLOWLIST = ("CI", "TZ", "HARNESS_SEED", "HARNESS_KEEP_CONTAINER")


@dataclass(frozen=True, kw_only=True)
class Mount:
    source: str
    target: str
    read_only: bool


@dataclass(frozen=True, kw_only=True)
class Spec:
    user: str
    workdir: str
    mounts: tuple[Mount, ...]
    network: str
    devices: tuple[str, ...] = ()
    group_add: tuple[str, ...] = ()
    ipc: str | None = None
    shm_size: str | None = None
    security_opt: tuple[str, ...] = ()
    cap_add: tuple[str, ...] = ()
    cpuset_cpus: str | None = None
    cpuset_mems: str | None = None
    mem_limit: str | None = None
    gpus: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


def resolve_group(name: str) -> str:
    """Device nodes belong to host groups: pass the host's gid (``render`` differs per
    distribution and may not exist in the image at all)."""
    if name.isdigit():
        return name
    try:
        return str(grp.getgrnam(name).gr_gid)
    except KeyError:
        return name


def cache_mount_root(matrix: Matrix) -> Path:
    return cache_root(matrix)


def suite_mounts(invocations: Sequence[Invocation]) -> tuple[Mount, ...]:
    """A suite outside the checkout (it has a cwd of its own): its rootdir, writable at its
    own path like a local run's, and its target when that lies elsewhere."""
    folders: dict[str, None] = {}
    for inv in invocations:
        if inv.cwd is None:
            continue
        for folder in (inv.rootdir, inv.cwd):
            folders[str(Path(folder).resolve())] = None
    kept = [f for f in folders if not any(Path(o) in Path(f).parents for o in folders)]
    return tuple(Mount(source=f, target=f, read_only=False) for f in kept)


def build_spec(matrix: Matrix, root: Path, run_dir: Path, *,
               cache_root: Path | None = None,
               extra_mounts: Sequence[Mount] = (), writable_checkout: bool = False) -> Spec:
    """``writable_checkout``: mount the checkout read-write, for --update-expectations
    (the suites rewrite their per-platform golden and expectation files in it)."""
    rt = matrix.runtime
    mounts = [Mount(source=str(root), target=str(root), read_only=not writable_checkout),
              Mount(source=str(run_dir), target=str(run_dir), read_only=False),
              *extra_mounts]
    caches = cache_root if cache_root is not None else cache_mount_root(matrix)
    mounts.append(Mount(source=str(caches), target=str(caches), read_only=False))
    devices = tuple(rt.devices)
    # Intel's runtime finds GPUs through /dev/dri/by-path, which --device does not carry.
    if any(d.rstrip("/") == "/dev/dri" for d in devices) and Path("/dev/dri/by-path").is_dir():
        mounts.append(Mount(source="/dev/dri/by-path", target="/dev/dri/by-path",
                            read_only=True))
    return Spec(
        user=f"{os.getuid()}:{os.getgid()}",
        workdir=str(root),
        mounts=tuple(mounts),
        network=rt.network or "none",
        devices=devices,
        group_add=tuple(resolve_group(g) for g in rt.group_add),
        ipc=rt.ipc,
        shm_size=rt.shm_size,
        security_opt=tuple(rt.security_opt),
        cap_add=tuple(rt.cap_add),
        cpuset_cpus=rt.cpuset_cpus,
        cpuset_mems=rt.cpuset_mems,
        mem_limit=rt.mem_limit,
        gpus=rt.gpus,
        labels={"org.harness.matrix": matrix.name},
    )


def container_env(matrix: Matrix, base_env: Mapping[str, str],
                  host_env: Mapping[str, str]) -> dict[str, str]:
    """Only an allowlist of host variables enters; then the harness's own settings."""
    allow = set(matrix.runtime.env_allowlist) | set(HARNESS_ALLOWLIST)
    env = {k: v for k, v in host_env.items() if k in allow}
    env.update(dict(matrix.runtime.env))
    env.update(base_env)
    env.setdefault("HOME", "/tmp")  # the invoking uid has no home in the image
    return env


def _gpu_request(gpus: str) -> Any:
    from docker.types import DeviceRequest

    value = gpus.strip()
    if value == "all":
        return DeviceRequest(count=-1, capabilities=[["gpu"]])
    if value.startswith("device="):
        ids = [i for i in value.removeprefix("device=").split(",") if i]
        return DeviceRequest(device_ids=ids, capabilities=[["gpu"]])
    return DeviceRequest(count=int(value), capabilities=[["gpu"]])


def _device(path: str) -> str:
    return path if ":" in path else f"{path}:{path}:rwm"


def sdk_options(spec: Spec) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "user": spec.user,
        "working_dir": spec.workdir,
        "network_mode": spec.network,
        "volumes": {m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"}
                    for m in spec.mounts},
        "labels": dict(spec.labels),
    }
    if spec.devices:
        opts["devices"] = [_device(d) for d in spec.devices]
    if spec.group_add:
        opts["group_add"] = list(spec.group_add)
    if spec.ipc:
        opts["ipc_mode"] = spec.ipc
    if spec.shm_size:
        opts["shm_size"] = spec.shm_size
    if spec.security_opt:
        opts["security_opt"] = list(spec.security_opt)
    if spec.cap_add:
        opts["cap_add"] = list(spec.cap_add)
    if spec.cpuset_cpus:
        opts["cpuset_cpus"] = spec.cpuset_cpus
    if spec.cpuset_mems:
        opts["cpuset_mems"] = spec.cpuset_mems
    if spec.mem_limit:
        # Swap equal to the limit: an overrun is an OOM kill, not a slow crawl.
        opts["mem_limit"] = spec.mem_limit
        opts["memswap_limit"] = spec.mem_limit
    if spec.gpus:
        opts["device_requests"] = [_gpu_request(spec.gpus)]
    return opts


def cli_args(spec: Spec, env: Mapping[str, str]) -> list[str]:
    """``docker run`` options for the same container; secret values never printed: a
    secret-looking variable is passed by name, taking its value from the caller's env."""
    args = ["--user", spec.user, "--workdir", spec.workdir, "--network", spec.network]
    for key, value in spec.labels.items():
        args += ["--label", f"{key}={value}"]
    for m in spec.mounts:
        args += ["-v", f"{m.source}:{m.target}" + (":ro" if m.read_only else "")]
    for d in spec.devices:
        args += ["--device", d]
    for g in spec.group_add:
        args += ["--group-add", g]
    if spec.ipc:
        args += ["--ipc", spec.ipc]
    if spec.shm_size:
        args += ["--shm-size", spec.shm_size]
    for s in spec.security_opt:
        args += ["--security-opt", s]
    for c in spec.cap_add:
        args += ["--cap-add", c]
    if spec.cpuset_cpus:
        args += ["--cpuset-cpus", spec.cpuset_cpus]
    if spec.cpuset_mems:
        args += ["--cpuset-mems", spec.cpuset_mems]
    if spec.mem_limit:
        args += ["--memory", spec.mem_limit, "--memory-swap", spec.mem_limit]
    if spec.gpus:
        args += ["--gpus", spec.gpus]
    for key in sorted(env):
        args += ["-e", key if is_secret(key) else f"{key}={env[key]}"]
    return args
