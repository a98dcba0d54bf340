"""Every kind of process a suite starts runs on the lane's emulated CPU (the matrix's
``cpu: {emulated: LEVEL}``), as torch's capability and CPUID say: the pytest controller,
its xdist workers, a subprocess started with sys.executable, multiprocessing's spawn and
forkserver children, and the gloo ranks of refengine's tensor-parallel runs."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cpu_seen import seen

# what an x86-64 level is, as torch and CPUID see it: capability, a flag it has, one it lacks
LEVELS = {"x86-64-v2": ("DEFAULT", "sse4_2", "avx2"), "x86-64-v3": ("AVX2", "avx2", "avx512f")}


@pytest.fixture
def level(platform: Any) -> tuple[str, str, str]:
    emulated = platform.matrix.cpu.emulated
    assert emulated in LEVELS, f"this suite checks a lane with an emulated level, not {emulated}"
    return LEVELS[emulated]


def judge(found: dict[str, Any], level: tuple[str, str, str], who: str) -> None:
    capability, has, lacks = level
    assert found["capability"] == capability, (who, found)
    assert has in found["flags"] and lacks not in found["flags"], (who, found)


def test_the_pytest_process_and_its_controller(level: tuple[str, str, str],
                                               request: pytest.FixtureRequest) -> None:
    judge(seen(), level, "this test's process")
    workerinput = getattr(request.config, "workerinput", None)
    assert workerinput is not None, "the lane runs this suite with xdist workers"
    judge(json.loads(workerinput["controller_cpu"]), level, "the pytest controller")


def test_a_subprocess_of_sys_executable(level: tuple[str, str, str]) -> None:
    code = "import json, cpu_seen; print(json.dumps(cpu_seen.seen()))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent),
                                                         *sys.path])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=600, check=True)
    judge(json.loads(done.stdout.strip().splitlines()[-1]), level, "a subprocess")


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_a_multiprocessing_child(method: str, level: tuple[str, str, str]) -> None:
    with multiprocessing.get_context(method).Pool(1) as pool:
        judge(pool.apply(seen), level, f"a {method} child")


def test_the_gloo_ranks(level: tuple[str, str, str], tmp_path: Path) -> None:
    from refengine.fusion.tp import run_ranks

    for found in run_ranks(2, tmp_path, "cpu_seen:on_rank"):
        judge(found, level, f"gloo rank {found['rank']}")
