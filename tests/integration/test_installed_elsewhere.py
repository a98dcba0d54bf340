"""A run folder of a user's project made on one machine repros on another where harness is
installed in another folder: the project's matrix extends a shipped one and runs a shipped
suite, whose path the resolved matrix keeps relative (``matrix/suite_paths.py``), so the
recorded matrix hashes as the current one does and its suite is found under this machine's
shipped root. "Another machine" is a copy of the harness (its packages, matrices and
suites) in a folder of its own, which runs the project and is then removed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from harness.roots import shipped_root

COPIED = ("harness", "refengine", "matrices", "suites")


def _harness(project: Path, *args: str, pythonpath: Path | None = None,
             ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_ROOT"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, "-m", "harness", "--root", str(project), *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=900,
                          check=False)


def test_a_project_run_repros_where_harness_is_installed_elsewhere(tmp_path: Path) -> None:
    elsewhere = tmp_path / "agent" / "harness-install"
    for name in COPIED:
        shutil.copytree(shipped_root() / name, elsewhere / name,
                        ignore=shutil.ignore_patterns("__pycache__", "downloads"))
    project = tmp_path / "project"
    (project / "matrices").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.harness]\n")
    (project / "matrices" / "mine.yaml").write_text(
        "extends: cpu.yaml\nname: mine\ndescription: a project's lane on shipped suites\n")

    ran = _harness(project, "run", "--matrix", "mine", "--suite", "platform",
                   pythonpath=elsewhere)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    [run] = (project / "reports" / "mine").iterdir()
    recorded = (run / "matrix.json").read_text()
    assert str(elsewhere) not in recorded
    paths = {name: s["path"] for name, s in json.loads(recorded)["suites"].items()}
    assert paths["platform"] == "suites/platform", paths
    passed = [f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
              for case in ET.parse(run / "merged.xml").iter("testcase")
              if len(case) == 0 and "dtype" in case.get("classname", "")]
    assert passed, "no passed platform test to repro"
    shutil.rmtree(elsewhere.parent)

    repro = _harness(project, "repro", str(run), "--test", passed[0])
    out = repro.stdout + repro.stderr
    assert repro.returncode == 0, out[-3000:]
    assert "changed since run" not in out, out[-3000:]
    assert "1 passed" in out, out[-3000:]
