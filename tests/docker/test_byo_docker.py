"""A suite outside the checkout under the docker runner: mounted at its own path, run in
its own folder, its import failure an error case like a local run's."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

from docker_helpers import ROOT, leftovers, tiny_matrix

from harness.matrix.model import Suite
from harness.results.junit_write import read_partial
from harness.results.outcome import Counts, Status
from harness.run.plan import PlanOptions, plan_run
from harness.runners.docker import DockerRunner

TREE = {
    "enginetests/__init__.py": "",
    "enginetests/test_ok.py": (
        "import pathlib\n\ndef test_writes_beside_itself():\n"
        "    pathlib.Path('written-by-test.txt').write_text('here')\n"
    ),
    "enginetests/test_broken.py": "import removed_name_here\n\ndef test_never():\n    pass\n",
}


def test_a_foreign_tree_runs_in_docker_from_its_own_folder(
    tiny_image: str, run_dir: Path, tmp_path: Path
) -> None:
    tree = tmp_path / "vendor"  # outside the checkout, which is mounted read-only
    for name, text in TREE.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    base = tiny_matrix()
    matrix = dataclasses.replace(
        base, suites={"own": Suite(name="own", path=str(tree), workers=1, timeout_s=300)}
    )
    (inv,) = plan_run(
        matrix, run_dir, ROOT, PlanOptions(python="python3", platform_spec="cpu", workers=1)
    )
    assert inv.cwd == tree and inv.rootdir == tree
    out = io.StringIO()
    runner = DockerRunner(matrix, image=tiny_image, echo=out, run_id=run_dir.name,
                          cache_root=run_dir / "cache")
    with runner.started(run_dir, [inv]):
        (outcome,) = runner.run()
    assert leftovers(f"org.harness.run={run_dir.name}") == ""
    assert outcome.status is Status.FAILED and outcome.exit_code == 1, out.getvalue()[-3000:]
    assert outcome.counts == Counts(passed=1, error=1)
    outcomes = {str(r["nodeid"]): r["outcome"] for r in read_partial(inv.partial)}
    assert outcomes == {
        "enginetests/test_ok.py::test_writes_beside_itself": "passed",
        "enginetests/test_broken.py": "failed",
    }
    assert (tree / "written-by-test.txt").read_text() == "here"
