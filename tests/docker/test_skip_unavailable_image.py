"""``--skip-unavailable`` and an image that cannot be had: exit 3, never a skipped run.

The flag is for a host that is not the matrix's (tests/integration/
test_skip_unavailable_scope.py walks the probe's refusal and the other preflight failures).
An image whose base is nowhere (a registry that refuses, a stand-in never built) is the
agent's trouble: a nightly lane that turned it into "skipped, exit 0" would stay green on a
broken agent. A real engine, a real pull that fails at once (a registry on a closed port).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def test_a_base_image_that_cannot_be_pulled_keeps_exit_3(tmp_path: Path, client: Any) -> None:
    project = tmp_path / "project"
    (project / "matrices").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n\n'
                                            "[tool.harness]\n")
    (project / "matrices" / "nobase.yaml").write_text(
        "extends: cpu.yaml\ndescription: an image whose base is nowhere\n"
        "image:\n  base: localhost:1/harness-missing-base:none\n  local_base: null\n")
    env = {**os.environ, "HARNESS_ROOT": str(project), "HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--matrix", "nobase", "--suite", "platform",
         "--docker", "--skip-unavailable", "--reports", str(tmp_path / "r")],
        env=env, text=True, capture_output=True, check=False, timeout=300)
    assert run.returncode == 3, run.stdout + run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("harness: error: image: ") and "harness-missing-base" in last
    assert "skipped" not in run.stdout
    (manifest,) = (json.loads(p.read_text()) for p in (tmp_path / "r").glob("*/*/manifest.json"))
    assert (manifest["status"], manifest["exit_code"]) == ("error", 3)
    assert manifest["infra_error"]["cause"]["cause"] == "infra-refusal"
