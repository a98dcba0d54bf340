"""Change-based selection against the 7 injected parity bugs, as real source changes.

For each bug of tests/integration/test_parity_catches_bugs.py, a temporary clone of this
checkout (its working tree) gets the bug as an edit of the provider file it targets,
committed; then:

- ``harness select`` picks the tests (per lane; the cpu lane's ids are matched against
  a full cpu run's JUnit);
- the selected share of that full cpu run's test time is printed (JUnit durations of
  the run folder given with --junit: one real run, never re-run here);
- with --run: ``harness run --matrix LANE --changed-since HEAD~1`` in the clone, and
  whether the selected tests fail: its exit code and the failing (or xfailed) tests.

The target: a one-file kernel change selects at most 15% of the cpu lane's time, and
the selection still fails on every bug.

Run: python bench/select_safety.py --junit reports/cpu/<run-id> [--run] [--bugs a,b]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.results.junit_read import read_junit  # noqa: E402
from harness.select import select_changes  # noqa: E402

TORCH = "refengine/providers/torch_provider.py"
RMS = "    return F.rms_norm(x, (x.shape[-1],), weight.to(x.dtype), eps)\n"
OFF_BY_ONE = '''

def _block_gemm_off_by_one(a, a_scales, w, w_scales, out_dtype):
    k = a.shape[-1]
    per_col = a_scales.float().repeat_interleave(127, dim=-1)
    per_col = torch.nn.functional.pad(per_col, (0, max(0, k - per_col.shape[-1])),
                                      value=1.0)[..., :k]
    w_deq = w.float() * reference.expand_block_scales(w_scales.float(), w.shape[0], k, 128, 128)
    return ((a.float() * per_col) @ w_deq.t()).to(out_dtype)


_BUGGY = {"fp8_block_gemm": _block_gemm_off_by_one}
'''


@dataclass(frozen=True)
class Bug:
    file: str
    edits: tuple[tuple[str, str], ...]  # (old, new), each old occurring once
    lane: str  # where the bug's kernel runs in the parity suite
    emulate: bool = False


BUGS = {
    "wrong-epsilon": Bug(TORCH, ((RMS, RMS.replace("eps)", "eps * 1e4)")),), "cpu"),
    "gate-up-swapped": Bug(TORCH, (("    return F.silu(x[..., :d]) * x[..., d:]\n",
                                    "    return F.silu(x[..., d:]) * x[..., :d]\n"),), "cpu"),
    # triton is the only non-reference fp8_quant kernel; cpu does not list it, cuda does
    "fp8-max-of-wrong-flavour": Bug(
        "refengine/triton_kernels/quant.py",
        (("    fmax, mant_bits, min_exp = fp8_format(fp8_dtype)\n",
          "    fmax, mant_bits, min_exp = 240.0, *fp8_format(fp8_dtype)[1:]\n"),),
        "cuda", emulate=True),
    "missing-scale": Bug(TORCH, ((
        "    out = acc * a_scales.float().reshape(-1, 1) * w_scales.float().reshape(1, -1)\n",
        "    out = acc * a_scales.float().reshape(-1, 1)\n"),), "cpu"),
    # inductor (a compile of the reference) is the only non-reference fp8_block_gemm
    "block-edge-off-by-one": Bug("refengine/providers/inductor_provider.py", (
        ("                fn = torch.compile(getattr(reference, op), dynamic=False,\n",
         "                fn = torch.compile(_BUGGY.get(op, getattr(reference, op)),"
         " dynamic=False,\n"),
        ("\ndef make_provider(device: str) -> InductorProvider:\n",
         OFF_BY_ONE + "\n\ndef make_provider(device: str) -> InductorProvider:\n")), "cpu"),
    "strided-read-as-contiguous": Bug(TORCH, ((RMS, RMS.replace(
        "F.rms_norm(x, ", "F.rms_norm(torch.as_strided(x, x.shape, (x.shape[-1], 1) "
        "if x.dim() == 2 else x.stride()), ")),), "cpu"),
    "undeclared-mutation": Bug(TORCH, ((RMS, RMS.replace("return F.rms_norm", "out = F.rms_norm")
                                        + "    x.add_(1.0)\n    return out\n"),), "cpu"),
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def make_clone(base: Path) -> Path:
    repo = base / "repo"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(repo)], check=True)
    for rel in git(ROOT, "ls-files", "-m", "-o", "--exclude-standard").splitlines():
        if (ROOT / rel).is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, repo / rel)
    git(repo, "-c", "user.email=b@b", "-c", "user.name=bench", "add", "-A")
    git(repo, "-c", "user.email=b@b", "-c", "user.name=bench", "commit", "-qm", "tree",
        "--allow-empty")
    return repo


def apply(repo: Path, bug: Bug) -> None:
    path = repo / bug.file
    text = path.read_text()
    for old, new in bug.edits:
        assert text.count(old) == 1, f"{bug.file}: {old!r} must occur once"
        text = text.replace(old, new)
    path.write_text(text)
    git(repo, "-c", "user.email=b@b", "-c", "user.name=bench", "commit", "-qam", "bug")


def cpu_times(run_dir: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for path in sorted((run_dir / "junit").glob("*.xml")):
        cases, _ = read_junit(path, lambda message: None)
        for case in cases:
            out[case.nodeid] = out.get(case.nodeid, 0.0) + max(case.duration, 0.0)
    return out


def run_selected(repo: Path, bug: Bug, reports: Path) -> tuple[int, float, list[str]]:
    argv = [sys.executable, "-m", "harness", "run", "--matrix", bug.lane,
            "--changed-since", "HEAD~1", "--reports", str(reports)]
    if bug.emulate:  # an emulated lane runs on this CPU; its own venv is not built here
        argv += ["--emulate", "--python", "current"]
    env = os.environ | {"HARNESS_ROOT": str(repo)}
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    failing: list[str] = []
    for path in sorted(reports.glob(f"{bug.lane}/*/junit/*.xml")):
        cases, _ = read_junit(path, lambda message: None)
        failing += [f"{c.status}: {c.nodeid.split('::')[-1]}" for c in cases
                    if c.status in ("failed", "error", "xfail")]
    if proc.returncode not in (0, 1):
        failing.append("harness: " + (proc.stdout + proc.stderr).strip().splitlines()[-1])
    return proc.returncode, wall, failing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--junit", type=Path, required=True, metavar="RUN_DIR",
                        help="a full cpu run folder (its JUnit durations)")
    parser.add_argument("--run", action="store_true", help="run each selection for real")
    parser.add_argument("--bugs", default=",".join(BUGS))
    args = parser.parse_args()
    times = cpu_times(args.junit)
    total = sum(times.values())
    print(f"full cpu run {args.junit.name}: {len(times)} tests, {total:.1f} s of test time")
    print(f"{'bug':<28}{'file':<36}{'cpu sel':>8}{'cpu time':>9}  lanes with tests"
          + ("  | run: lane, exit, wall, failing" if args.run else ""))
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_clone(Path(tmp))
        base = git(repo, "rev-parse", "HEAD").strip()
        for name in args.bugs.split(","):
            bug = BUGS[name]
            git(repo, "reset", "-q", "--hard", base)
            apply(repo, bug)
            selection = select_changes(repo, "HEAD~1")
            cpu = selection.lanes["cpu"]
            chosen = [t for t in times if cpu.selects(t)]
            share = sum(times[t] for t in chosen) / total
            lanes = ",".join(n for n, lane in selection.lanes.items() if lane.affected)
            line = (f"{name:<28}{bug.file.removeprefix('refengine/'):<36}{len(chosen):>8}"
                    f"{100 * share:>8.1f}%  {lanes}")
            if args.run:
                code, wall, failing = run_selected(repo, bug, Path(tmp) / f"reports-{name}")
                line += f"  | {bug.lane}, exit {code}, {wall:.0f} s, {len(failing)}: "
                line += "; ".join(failing[:4])
            print(line, flush=True)


if __name__ == "__main__":
    main()
