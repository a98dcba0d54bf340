"""Overhead of the docker runner against a bare `docker run` of the same pytest command.

Same image, same tiny suite, alternated A/B so drift hits both sides alike; prints the
medians, their ratio and the absolute overhead per run (target: under 2 s).

    python bench/container_overhead.py [--rounds 5] [--image TAG]

Needs a Docker engine (ci/bootstrap-docker.sh) and harness-base:bookworm
(ci/make-base-image.sh); builds the small test image (base + pytest) if missing.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SUITE = "def test_one():\n    assert 1 + 1 == 2\n\ndef test_two():\n    assert 'a' < 'b'\n"


def tiny_matrix():  # type: ignore[no-untyped-def]
    from harness.matrix import load_matrix
    from harness.matrix.model import PythonEnv

    m = load_matrix("cpu", ROOT)
    return dataclasses.replace(m, name="dockertest",
                               python=PythonEnv(requirements=(), python="3.11"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--image")
    args = parser.parse_args()

    from harness.platform import images
    from harness.runners.docker import DockerRunner, docker_command_line
    from harness.runners.invocation import Invocation

    matrix = tiny_matrix()
    client = images.engine()
    image = args.image or images.build(matrix, ROOT, out=io.StringIO(), client=client)[0].tag
    reports = ROOT / "reports" / "bench"
    reports.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="overhead-", dir=reports))
    (work / "suite").mkdir()
    (work / "suite" / "test_tiny.py").write_text(SUITE)
    runner_s: list[float] = []
    bare_s: list[float] = []
    try:
        for i in range(args.rounds):
            run_dir = work / f"run{i}"
            junit = run_dir / "junit" / "tiny.xml"
            partial = junit.with_suffix(".partial.jsonl")
            argv = ("python3", "-m", "pytest", str(work / "suite"), "-p", "harness.plugin",
                    f"--junitxml={junit}", f"--harness-partial={partial}",
                    "-p", "no:cacheprovider", "-q", f"--rootdir={work / 'suite'}")
            inv = Invocation(suite="tiny", argv=argv, env={}, junit=junit,
                             log=run_dir / "logs" / "tiny.log", partial=partial,
                             timeout_s=300, workers=1)
            (run_dir / "junit").mkdir(parents=True)
            cache = work / "cache"
            bare = docker_command_line(matrix, inv, run_dir=run_dir, image=image, root=ROOT,
                                       cache_root=cache)
            bare[bare.index("--name") + 1] += f"-{i}"
            order = ("runner", "bare") if i % 2 == 0 else ("bare", "runner")
            for side in order:
                start = time.perf_counter()
                if side == "runner":
                    runner = DockerRunner(matrix, image=image, echo=None, client=client,
                                          cache_root=cache)
                    with runner.started(run_dir, [inv]):
                        [outcome] = runner.run()
                    assert outcome.status.value == "passed", outcome
                    runner_s.append(time.perf_counter() - start)
                else:
                    subprocess.run(bare, check=True, capture_output=True)
                    bare_s.append(time.perf_counter() - start)
            print(f"round {i}: runner {runner_s[-1]:.2f} s, bare docker run {bare_s[-1]:.2f} s",
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r, b = statistics.median(runner_s), statistics.median(bare_s)
    print(f"median runner {r:.2f} s, bare docker run {b:.2f} s, ratio {r / b:.2f}, "
          f"overhead {r - b:+.2f} s per run (target < 2 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
