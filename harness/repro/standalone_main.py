"""``harness repro --standalone OUT.py``: the steps, from what was asked to the file."""

from __future__ import annotations

from pathlib import Path

from harness.errors import UsageError
from harness.matrix.loader import load_matrix
from harness.repro.run import load_recorded_matrix, read_recorded, say
from harness.repro.standalone import (
    Setup,
    a_finding,
    describe_signature,
    first_script,
    in_run_folder,
    observe_text,
    parse_test_id,
    script_env,
    shrink_script,
    write,
    write_text,
)
from harness.repro.standalone_engine import EngineCase, engine_case, render_engine
from harness.run.venvs import interpreter

ENGINE_TIMEOUT_S = 900.0  # vLLM's engine starts in the script: a minute or two on 2 cores


def make_standalone(*, root: Path, target: Path | None, matrix_name: str | None,
                    tests: list[str], out: Path, minimize: bool, budget_s: float,
                    python: str, trust: bool) -> int:
    """Write OUT.py for one kernel_parity or vllm_engine case; exit 0, or raise a
    HarnessError."""
    if len(tests) != 1:
        raise UsageError("--standalone takes one --test ID (a kernel_parity or vllm_engine "
                         "case id)")
    if (target is None) == (matrix_name is None):
        raise UsageError("--standalone takes a run folder or --matrix M (one of them)")
    engine = engine_case(tests[0])
    if engine is not None:
        if minimize:
            raise UsageError("--minimize: the vllm_engine case has no sizes to shrink (its "
                             "model is the suite's own)")
        setup = _setup(root, target, matrix_name, engine.name, python, trust)
        say(f"building {engine.name} in {setup.matrix.name}'s environment")
        return _engine_script(setup, engine, out)
    case = parse_test_id(tests[0])
    setup = _setup(root, target, matrix_name, case.name, python, trust)
    say(f"building {case.name} in {setup.matrix.name}'s environment")
    script, answer = first_script(setup, case)
    say(f"seen here: {describe_signature(script.expected)}")
    if minimize:
        script, shrunk = shrink_script(setup, case, script, answer, budget_s=budget_s, say=say)
        say(f"minimized: {shrunk.summary()} in {shrunk.trials} trials; seen: "
            f"{describe_signature(script.expected)}")
    write(script, out)
    say(f"wrote {out}: python {out} exits 1 while the finding is there, 0 once it is fixed")
    return 0


def _setup(root: Path, target: Path | None, matrix_name: str | None, name: str, python: str,
           trust: bool) -> Setup:
    """The matrix, seed and origin of the case: a run folder's recorded ones, or a matrix's."""
    if target is not None:
        rec = read_recorded(target)
        matrix = load_recorded_matrix(rec, root, trust=trust)
        if rec.run_dir is None or not in_run_folder(rec.run_dir, name):
            raise UsageError(f"{target}: run {rec.run_id} has no case {name}")
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
    return Setup(python=interpreter(python, matrix, emulate=False, on_lane_cpu=False),
                 root=root, matrix=matrix,
                 seed=seed, origin=origin)


def _engine_script(setup: Setup, case: EngineCase, out: Path) -> int:
    """The vllm_engine case as a script: run once where it was asked, written with what it
    showed there as its expected outcome."""
    def text(expected: dict[str, object]) -> str:
        return render_engine(setup.root, case, env=script_env(setup.matrix),
                             expected=expected, origin=setup.origin,
                             pins=tuple(setup.matrix.python.requirements))

    seen = a_finding(observe_text(setup, text({"kind": "?"}), timeout_s=ENGINE_TIMEOUT_S),
                     case.name)
    expected = {k: v for k, v in seen.items() if k not in ("vllm", "transformers")}
    say(f"seen here: {describe_signature(expected)}")
    write_text(text(expected), out)
    say(f"wrote {out}: python {out} exits 1 while the finding is there, 0 once it is fixed")
    return 0
