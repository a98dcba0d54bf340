"""``harness repro --standalone OUT.py``: the steps, from what was asked to the file."""

from __future__ import annotations

from pathlib import Path

from harness.errors import UsageError
from harness.matrix.loader import load_matrix
from harness.repro.run import load_recorded_matrix, read_recorded, say
from harness.repro.standalone import (
    Setup,
    describe_signature,
    first_script,
    in_run_folder,
    parse_test_id,
    shrink_script,
    write,
)
from harness.run.venvs import interpreter


def make_standalone(*, root: Path, target: Path | None, matrix_name: str | None,
                    tests: list[str], out: Path, minimize: bool, budget_s: float,
                    python: str, trust: bool) -> int:
    """Write OUT.py for one kernel_parity case; exit 0, or raise a HarnessError."""
    if len(tests) != 1:
        raise UsageError("--standalone takes one --test ID (a kernel_parity case id)")
    if (target is None) == (matrix_name is None):
        raise UsageError("--standalone takes a run folder or --matrix M (one of them)")
    case = parse_test_id(tests[0])
    if target is not None:
        rec = read_recorded(target)
        matrix = load_recorded_matrix(rec, root, trust=trust)
        if rec.run_dir is None or not in_run_folder(rec.run_dir, case):
            raise UsageError(f"{target}: run {rec.run_id} has no case {case.name}")
        pinned = f", --pin {' '.join(rec.pins)}" if rec.pins else ""
        seed, origin = rec.seed, (f"run {rec.run_id} of matrix {matrix.name} "
                                  f"(seed {rec.seed}{pinned})")
        if rec.emulate:
            raise UsageError(f"{target}: run {rec.run_id} was emulated; --standalone needs "
                             "the vllm provider's own run")
    else:
        assert matrix_name is not None
        matrix = load_matrix(matrix_name, root)
        seed, origin = 0, f"matrix {matrix.name} (seed 0)"
    setup = Setup(python=interpreter(python, matrix, emulate=False), root=root, matrix=matrix,
                  seed=seed, origin=origin)
    say(f"building {case.name} in {matrix.name}'s environment")
    script, answer = first_script(setup, case)
    say(f"seen here: {describe_signature(script.expected)}")
    if minimize:
        script, shrunk = shrink_script(setup, case, script, answer, budget_s=budget_s, say=say)
        say(f"minimized: {shrunk.summary()} in {shrunk.trials} trials; seen: "
            f"{describe_signature(script.expected)}")
    write(script, out)
    say(f"wrote {out}: python {out} exits 1 while the finding is there, 0 once it is fixed")
    return 0
