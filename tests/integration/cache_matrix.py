"""A cpu matrix whose cache root is a temporary folder, for tests that prime or break it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.roots import project_root

ROOT = project_root()


def temp_cpu_matrix(folder: Path) -> Path:
    """``folder/cpu-tmp.yaml``: the cpu matrix (same name, so the same golden files) with
    its caches under ``folder/cache``."""
    path = folder / "cpu-tmp.yaml"
    path.write_text(f"extends: cpu.yaml\nname: cpu\ncaches: {{root: {folder / 'cache'}}}\n")
    return path


def harness(
    *args: str, prefix: tuple[str, ...] = (), timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    # The inductor cache of a temp root starts cold; the e2e subsets these tests run do
    # not compile, but keep a caller's TORCHINDUCTOR_CACHE_DIR out of the way anyway.
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    return subprocess.run(
        [*prefix, sys.executable, "-m", "harness", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
