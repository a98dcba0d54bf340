"""Real-engine tests (marker ``docker``): a tiny image, the base plus pytest, and faults.

The engine must answer (ci/bootstrap-docker.sh starts one); the tests skip with that
hint otherwise. vfs copies every layer whole, so one small image serves every test.
"""

from __future__ import annotations

import io
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import ROOT, tiny_matrix


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/docker/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.docker)


def _unavailable(reason: str) -> None:
    """Skip on a developer machine; in CI (HARNESS_REQUIRE_DOCKER=1) that is a failure."""
    if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def client() -> Any:
    import docker

    try:
        c = docker.from_env(timeout=300)
        c.ping()
    except Exception:
        _unavailable("no Docker engine answers; start one with ci/bootstrap-docker.sh")
    if not any("harness-base:bookworm" in (i.tags or []) for i in c.images.list()):
        _unavailable("harness-base:bookworm missing; build it with ci/make-base-image.sh")
    return c


@pytest.fixture(scope="session")
def tiny_image(client: Any) -> str:
    from harness.platform import images

    rcp, _ = images.build(tiny_matrix(), ROOT, out=io.StringIO(), client=client)
    return rcp.tag


@pytest.fixture
def run_dir() -> Iterator[Path]:
    # Under the checkout's reports/ as in a real run (nested in the read-only mount).
    # mkdtemp: unique across xdist workers and earlier sessions' leftovers.
    base = ROOT / "reports" / "dockertest"
    base.mkdir(parents=True, exist_ok=True)
    target = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    (target / "junit").mkdir()
    yield target
    subprocess.run(["rm", "-rf", str(target)], check=False)
