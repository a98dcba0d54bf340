"""``harness repro --standalone OUT.py``: the steps, from what was asked to the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.errors import UsageError
from harness.matrix.loader import load_matrix
from harness.matrix.model import Matrix
from harness.repro.run import load_recorded_matrix, read_recorded, say
from harness.repro.standalone import (
    Setup,
    ask,
    case_name,
    describe_signature,
    first_script,
    shrink_script,
    write_text,
)
from harness.run.venvs import interpreter


def make_standalone(*, root: Path, target: Path | None, matrix_name: str | None,
                    tests: list[str], out: Path, minimize: bool, budget_s: float,
                    python: str, trust: bool,
                    import_root: Callable[[Matrix], Path] | None = None) -> int:
    """Write OUT.py for one case whose suite offers a ``standalone`` hook; exit 0, or raise
    a HarnessError. ``import_root``: where harness imports from in the matrix's
    environment (default: ``root``, a checkout)."""
    if len(tests) != 1:
        raise UsageError("--standalone takes one --test ID (a case whose suite offers a "
                         "standalone script: docs/repro.md)")
    if (target is None) == (matrix_name is None):
        raise UsageError("--standalone takes a run folder or --matrix M (one of them)")
    test_id, name = tests[0], case_name(tests[0])
    setup = _setup(root, target, matrix_name, name, python, trust, import_root)
    say(f"building {name} in {setup.matrix.name}'s environment")
    first = ask(setup, test_id, {"kind": "?"})
    if minimize and not first.get("sizes"):
        raise UsageError("--minimize: " + first.get("unshrinkable",
                                                    f"{name} has no sizes to shrink"))
    answer, seen = first_script(setup, test_id, first)
    say(f"seen here: {describe_signature(seen)}")
    if minimize:
        text, seen, shrunk = shrink_script(setup, test_id, answer, seen, budget_s=budget_s,
                                           say=say)
        say(f"minimized: {shrunk.summary()} in {shrunk.trials} trials; seen: "
            f"{describe_signature(seen)}")
    else:
        text = ask(setup, test_id, seen)["text"]
    write_text(text, out)
    say(f"wrote {out}: python {out} exits 1 while the finding is there, 0 once it is fixed")
    return 0


def _setup(root: Path, target: Path | None, matrix_name: str | None, name: str, python: str,
           trust: bool, import_root: Callable[[Matrix], Path] | None) -> Setup:
    """The matrix, seed and origin of the case: a run folder's recorded ones, or a matrix's."""
    if target is not None:
        rec = read_recorded(target)
        matrix = load_recorded_matrix(rec, root, trust=trust)
        if rec.folder is None or not rec.folder.find(name):
            raise UsageError(f"{target}: run {rec.run_id} has no case {name}")
        pinned = f", --pin {' '.join(rec.pins)}" if rec.pins else ""
        seed, origin = rec.seed, (f"run {rec.run_id} of matrix {matrix.name} "
                                  f"(seed {rec.seed}{pinned})")
        if rec.emulate:
            raise UsageError(f"{target}: run {rec.run_id} was emulated; --standalone needs "
                             "the engine's own run")
    else:
        assert matrix_name is not None
        matrix = load_matrix(matrix_name, root)
        seed, origin = 0, f"matrix {matrix.name} (seed 0)"
    return Setup(python=interpreter(python, matrix, emulate=False, on_lane_cpu=False),
                 root=root, matrix=matrix, seed=seed, origin=origin,
                 import_root=import_root(matrix) if import_root else root)
