"""``harness repro --standalone OUT.py``: one kernel_parity finding as a script of its own.

The case is built in the matrix's environment (standalone_dump, a subprocess: torch is
never imported here), written out with the suite's own code for the op, taken from the
files under the checkout by ``ast`` (standalone_ops, standalone_render), run once there
to see its signature, and written with that signature as the expected outcome. A case that
passes here is refused (nothing to reproduce). ``--minimize`` then shrinks its sizes one at
a time (standalone_shrink) while the script still fails the same way.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import InfraError, UsageError
from harness.matrix.model import Matrix
from harness.process.run import run_captured
from harness.repro.standalone_dump import ArgSpec, DumpAnswer, DumpRequest
from harness.repro.standalone_ops import SCRIPT_OPS
from harness.repro.standalone_render import Script, Signature, render
from harness.repro.standalone_shrink import Shrunk, minimize, same_failure
from harness.results.run_folder import read_run

PARITY = "suites/kernel_parity/test_parity.py::test_parity["
DUMP_TIMEOUT_S = 300.0
SCRIPT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class CaseId:
    op: str
    case: str
    dtype: str
    provider: str
    device: str

    @property
    def name(self) -> str:
        return f"test_parity[{self.op}-{self.case}-{self.dtype}-{self.provider}-{self.device}]"


def parse_test_id(test_id: str) -> CaseId:
    """``...test_parity[rms_norm-x-strided-float32-vllm-cpu]`` -> its op, case, dtype..."""
    match = re.search(r"test_parity\[([^\]]+)\]$", test_id)
    if match is None:
        raise UsageError(f"--standalone: {test_id!r} is not a case with a standalone "
                         f"template ({PARITY}OP-CASE-DTYPE-PROVIDER-DEVICE], or "
                         "vllm_engine's test_greedy_tokens_match_transformers[DTYPE])")
    parts = match.group(1).split("-")
    op = next((name for name in sorted(SCRIPT_OPS, key=len, reverse=True)
               if match.group(1).startswith(name + "-")), None)
    if op is None or len(parts) < 5:
        known = ", ".join(sorted(SCRIPT_OPS))
        raise UsageError(f"--standalone: no standalone template for {match.group(1)!r} "
                         f"(ops with one: {known})")
    dtype, provider, device = parts[-3:]
    case = match.group(1)[len(op) + 1:-len(f"-{dtype}-{provider}-{device}")]
    if provider != "vllm" or device != "cpu":
        raise UsageError(f"--standalone: {provider} on {device}: only the vllm provider's "
                         "cases (on the cpu) have a standalone template")
    return CaseId(op=op, case=case, dtype=dtype, provider=provider, device=device)


def in_run_folder(run_dir: Path, name: str) -> bool:
    """Whether the run recorded the case ``name``, as the one run-folder reader reads it."""
    return bool(read_run(run_dir, lambda _line: None).find(name))


@dataclass(frozen=True)
class Setup:
    """Where and how the case is built and its script run."""

    python: str
    root: Path
    matrix: Matrix
    seed: int
    origin: str


def dump(setup: Setup, case: CaseId, shrink: dict[str, int] | None = None) -> DumpAnswer:
    request: DumpRequest = {"op": case.op, "case": case.case, "dtype": case.dtype,
                            "seed": setup.seed, "dtypes": list(setup.matrix.dtypes),
                            "shrink": shrink or {}}
    paths = [str(setup.root), str(setup.root / "suites" / "kernel_parity")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    try:
        got = run_captured([setup.python, "-m", "harness.repro.standalone_dump",
                            json.dumps(request)], timeout_s=DUMP_TIMEOUT_S, env=env)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InfraError(f"--standalone: building the case failed: {error}") from error
    lines = got.stdout.strip().splitlines()
    answer: DumpAnswer = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    if "error" in answer:
        raise UsageError(f"--standalone: {answer['error']}")
    if got.returncode or "args" not in answer:
        tail = (got.stderr.strip().splitlines() or ["no output"])[-1]
        raise InfraError(f"--standalone: building the case failed: {tail}")
    return answer


def tolerance(matrix: Matrix, case: CaseId, args: list[ArgSpec]) -> dict[str, float]:
    out_dtype = next((a["dtype"] for a in args if "dtype" in a), case.dtype)
    tol, _ = matrix.tolerances.lookup(out_dtype, case.op)
    return {"atol": tol.atol, "rtol": tol.rtol}


def script_for(setup: Setup, case: CaseId, answer: DumpAnswer,
               expected: Signature, shrunk: str = "") -> Script:
    return Script(test_id=PARITY + case.name.removeprefix("test_parity["), op=case.op,
                  args=answer["args"], tolerance=tolerance(setup.matrix, case, answer["args"]),
                  env=script_env(setup.matrix), expected=expected, origin=setup.origin,
                  shrunk=shrunk, pins=tuple(setup.matrix.python.requirements),
                  root=setup.root)


def script_env(matrix: Matrix) -> dict[str, str]:
    """What a script sets before it starts: the matrix's runtime env, and on a lane with an
    emulated CPU that CPU as qemu-user reads it (QEMU_CPU): the script runs its case there."""
    env = dict(matrix.runtime.env)
    if matrix.cpu.emulated:
        from harness.platform.cpu_emulation import cpu_option, qemu

        env["QEMU_CPU"] = cpu_option(matrix.cpu, qemu())
    return env


def observe(setup: Setup, script: Script) -> Signature:
    """Run the script in the matrix's environment; the signature it saw."""
    return observe_text(setup, render(script))


def observe_text(setup: Setup, text: str, timeout_s: float = SCRIPT_TIMEOUT_S) -> Signature:
    """Run a script's text in the matrix's environment; the signature it printed."""
    with tempfile.TemporaryDirectory(prefix="harness-standalone-") as tmp:
        path = Path(tmp) / "repro.py"
        path.write_text(text, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        try:
            got = run_captured([setup.python, str(path), "--json"], timeout_s=timeout_s,
                               env=env, cwd=Path(tmp))
        except (OSError, subprocess.TimeoutExpired) as error:
            raise InfraError(f"--standalone: the script did not finish: {error}") from error
    for line in got.stdout.splitlines():
        if line.startswith("SIGNATURE "):
            seen: Signature = json.loads(line.removeprefix("SIGNATURE "))
            return seen
    tail = (got.stderr.strip().splitlines() or ["no output"])[-1]
    raise InfraError(f"--standalone: the script ended without a signature: {tail}")


def describe_signature(seen: Mapping[str, object]) -> str:
    kind = str(seen.get("kind", ""))
    if kind == "mismatch":
        return (f"mismatch: max abs err {seen['max_abs_err']:.4g}, max rel err "
                f"{seen['max_rel_err']:.4g}, headroom {seen['headroom']:.4g}")
    if kind == "exception":
        return f"exception: {seen['type']}: {seen['message']}"
    if kind == "signal":
        return f"signal: {seen['signal']}"
    if kind == "tokens_differ":
        return f"tokens differ: first difference per prompt {seen['first_difference']}"
    if kind:
        return kind
    if "first_difference" in seen:
        return "passes (vLLM's greedy tokens match transformers')"
    return f"passes (headroom {seen.get('headroom', 0):.4g})"


def a_finding(seen: Signature, name: str) -> Signature:
    """``seen`` when the script's first run showed a finding; else why there is no script
    (it could not run: InfraError; the case passes: NothingToReproduce)."""
    if seen.get("kind") == "cannot_run":
        raise InfraError(f"--standalone: the script cannot run here: {seen.get('detail')}")
    if not seen.get("kind"):
        raise NothingToReproduce(f"--standalone: {name} passes here "
                                 f"({describe_signature(seen)}): no finding to reproduce; "
                                 "nothing written")
    return seen


def first_script(setup: Setup, case: CaseId) -> tuple[Script, DumpAnswer]:
    """The script of the case as built, with the signature it shows here."""
    answer = dump(setup, case)
    seen = a_finding(observe(setup, script_for(setup, case, answer, {"kind": "?"})), case.name)
    return replace(script_for(setup, case, answer, seen)), answer


class NothingToReproduce(UsageError):
    """The case passes where it was built: exit 1, no script."""

    exit_code = 1


def write(script: Script, out: Path) -> None:
    write_text(render(script), out)


def write_text(text: str, out: Path) -> None:
    try:
        out.write_text(text, encoding="utf-8")
        out.chmod(0o755)
    except OSError as error:
        raise UsageError(f"--standalone: cannot write {out}: {error.strerror}") from error


def shrink_script(setup: Setup, case: CaseId, script: Script, answer: DumpAnswer, *,
                  budget_s: float,
                  say: Callable[[str], object] = print) -> tuple[Script, Shrunk]:
    """The script of the smallest case that still fails as ``script`` does."""

    def fails(sizes: dict[str, int]) -> bool:
        seen = observe(setup, script_for(setup, case, dump(setup, case, sizes), script.expected))
        same = same_failure(script.expected, seen)
        shown = ", ".join(f"{k} {v}" for k, v in sizes.items())
        say(f"minimize: {shown}: {describe_signature(seen)}"
            + ("" if same else " (not the finding)"))
        return same

    result = minimize(answer["sizes"], answer["steps"], fails, budget_s=budget_s)
    final = dump(setup, case, result.sizes)
    seen = observe(setup, script_for(setup, case, final, script.expected))
    if not same_failure(script.expected, seen):  # a flaky trial: keep the case as built
        return script, Shrunk(result.start, result.start, result.trials,
                              "the shrunk case no longer fails the same way")
    return script_for(setup, case, final, seen, shrunk=result.summary()), result
