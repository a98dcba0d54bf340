"""The pasteable docker command lines (--dry-run) per platform: no engine needed."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from harness.matrix import load_matrix
from harness.roots import project_root
from harness.runners.docker import docker_command_line
from harness.runners.docker_spec import build_spec, sdk_options
from harness.runners.invocation import Invocation

ROOT = project_root().resolve()
RUN = ROOT / "reports" / "x" / "20261129T170000Z-abc123"
CACHE = Path("/var/cache/harness-test")


def inv() -> Invocation:
    junit = RUN / "junit" / "kernel_parity.xml"
    return Invocation(suite="kernel_parity",
                      argv=("python3", "-m", "pytest", str(ROOT / "suites/kernel_parity")),
                      env={"HARNESS_TIER": "full"}, junit=junit, log=RUN / "logs" / "k.log",
                      partial=junit.with_suffix(".partial.jsonl"), timeout_s=60, workers=1)


def line(matrix: str, host_env: dict[str, str] | None = None) -> list[str]:
    return docker_command_line(load_matrix(matrix, ROOT), inv(), run_dir=RUN,
                               image="harness-x:0123", root=ROOT, env={"HARNESS_ROOT": str(ROOT)},
                               host_env=host_env or {}, cache_root=CACHE)


def pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


def test_rocm_devices_groups_and_options() -> None:
    argv = line("rocm", {"HIP_VISIBLE_DEVICES": "0,1", "SECRET_OTHER": "x"})
    assert pairs(argv, "--device") == ["/dev/kfd", "/dev/dri"]
    assert len(pairs(argv, "--group-add")) == 2  # video + render, as host gids where known
    assert pairs(argv, "--security-opt") == ["seccomp=unconfined"]
    assert pairs(argv, "--cap-add") == ["SYS_PTRACE"]
    assert pairs(argv, "--ipc") == ["host"]
    assert pairs(argv, "--shm-size") == ["16g"]
    assert pairs(argv, "--network") == ["none"]
    assert "HIP_VISIBLE_DEVICES=0,1" in pairs(argv, "-e")
    assert not any(e.startswith("SECRET_OTHER") for e in pairs(argv, "-e"))  # not allowlisted
    assert pairs(argv, "--user") == [f"{os.getuid()}:{os.getgid()}"]
    mounts = pairs(argv, "-v")
    assert f"{ROOT}:{ROOT}:ro" in mounts
    assert f"{RUN}:{RUN}" in mounts
    assert f"{CACHE}:{CACHE}" in mounts
    assert argv[argv.index("harness-x:0123") + 1:] == list(inv().argv)


def test_cuda_gpus_and_sdk_device_request() -> None:
    import dataclasses

    m = load_matrix("cuda", ROOT)
    argv = line("cuda")
    assert pairs(argv, "--gpus") == [m.runtime.gpus]
    two = dataclasses.replace(m, runtime=dataclasses.replace(m.runtime, gpus="device=0,1"))
    [request] = sdk_options(build_spec(two, ROOT, RUN, cache_root=CACHE))["device_requests"]
    assert request["DeviceIDs"] == ["0", "1"] and request["Capabilities"] == [["gpu"]]
    every = dataclasses.replace(m, runtime=dataclasses.replace(m.runtime, gpus="all"))
    [request] = sdk_options(build_spec(every, ROOT, RUN, cache_root=CACHE))["device_requests"]
    assert request["Count"] == -1


def test_xpu_dri_group_and_env() -> None:
    argv = line("xpu", {"ZE_AFFINITY_MASK": "0.0"})
    assert pairs(argv, "--device") == ["/dev/dri"]
    assert len(pairs(argv, "--group-add")) == 1
    assert pairs(argv, "--ipc") == ["host"]
    env = pairs(argv, "-e")
    assert "ZE_FLAT_DEVICE_HIERARCHY=FLAT" in env and "ZE_AFFINITY_MASK=0.0" in env


def test_secret_values_never_printed() -> None:
    argv = line("rocm", {"HF_TOKEN": "hf_supersecret"})
    text = shlex.join(argv)
    assert "hf_supersecret" not in text
    assert "HF_TOKEN" in pairs(argv, "-e")  # passed by name: the value comes from the caller


def test_line_is_pasteable_shell() -> None:
    argv = line("cpu")
    assert shlex.split(shlex.join(argv)) == argv
    assert argv[:3] == ["docker", "run", "--rm"]


@pytest.mark.parametrize("name", ["cpu", "zen", "s390x"])
def test_cpu_lanes_have_no_devices(name: str) -> None:
    argv = line(name)
    assert "--device" not in argv and "--gpus" not in argv
    assert "--platform" not in argv  # imported s390x images run through binfmt without it
