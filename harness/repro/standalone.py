"""``harness repro --standalone OUT.py``: one finding as a script of its own.

The script is a suite's: its ``standalone`` hook (docs/byo-suite.md, "A suite's hooks";
standalone_hook, a subprocess in the matrix's environment: torch is never imported here)
writes it for a test id of its own. harness runs it there once to see its signature, and
writes it with that signature as the expected outcome. A case that passes here is refused
(nothing to reproduce). ``--minimize`` then shrinks the sizes the hook names, one at a time
(standalone_shrink), while the script still fails the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InfraError, UsageError
from harness.matrix.model import Matrix
from harness.process.run import run_captured
from harness.repro.standalone_hook import HookCall, StandaloneAnswer
from harness.repro.standalone_render import Signature
from harness.repro.standalone_shrink import Shrunk, minimize
from harness.results.fingerprint import same_failure

HOOK_TIMEOUT_S = 300.0
SCRIPT_TIMEOUT_S = 300.0


def case_name(test_id: str) -> str:
    """The name a run folder records a case by: its node id's last part."""
    return test_id.rsplit("::", 1)[-1]


@dataclass(frozen=True)
class Setup:
    """Where and how the case is built and its script run."""

    python: str
    root: Path
    matrix: Matrix
    seed: int
    origin: str
    import_root: Path  # where harness imports from in the matrix's environment


def ask(setup: Setup, test_id: str, expected: Signature, shrink: dict[str, int] | None = None,
        shrunk: str = "") -> StandaloneAnswer:
    """The script a suite's hook writes for ``test_id`` (expected: ``expected``)."""
    with tempfile.TemporaryDirectory(prefix="harness-standalone-") as tmp:
        matrix_file = Path(tmp) / "matrix.json"
        matrix_file.write_text(json.dumps(setup.matrix.resolved, default=str), encoding="utf-8")
        call: HookCall = {"test_id": test_id, "root": str(setup.root),
                          "matrix_file": str(matrix_file), "seed": setup.seed,
                          "origin": setup.origin, "env": script_env(setup.matrix),
                          "pins": list(setup.matrix.python.requirements),
                          "expected": expected, "shrink": shrink or {}, "shrunk": shrunk}
        paths = dict.fromkeys([str(setup.root), str(setup.import_root)])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        try:
            got = run_captured([setup.python, "-m", "harness.repro.standalone_hook",
                                json.dumps(call)], timeout_s=HOOK_TIMEOUT_S, env=env)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise InfraError(f"--standalone: building the case failed: {error}") from error
    lines = got.stdout.strip().splitlines()
    answer: StandaloneAnswer = (json.loads(lines[-1]) if lines and lines[-1].startswith("{")
                                else {})
    if "error" in answer:
        raise UsageError(f"--standalone: {answer['error']}")
    if "failed" in answer:
        raise InfraError(f"--standalone: {answer['failed']}")
    if got.returncode or "text" not in answer:
        tail = (got.stderr.strip().splitlines() or ["no output"])[-1]
        raise InfraError(f"--standalone: building the case failed: {tail}")
    return answer


def script_env(matrix: Matrix) -> dict[str, str]:
    """What a script sets before it starts: the matrix's runtime env, and on a lane with an
    emulated CPU that CPU as qemu-user reads it (QEMU_CPU): the script runs its case there,
    and inductor compiles for it (its -march, as the lane's interpreter sets it: the
    compiler runs on this machine's CPU, and code for it dies of SIGILL on the lane's)."""
    env = dict(matrix.runtime.env)
    if matrix.cpu.emulated:
        from harness.platform.cpu_emulation import MARCH_ENV, cpu_option, march, qemu

        env["QEMU_CPU"] = cpu_option(matrix.cpu, qemu())
        env.setdefault(MARCH_ENV, march(matrix.cpu))
    return env


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
        said = describe_signature(seen).replace("passes", "passes here", 1)
        raise NothingToReproduce(f"--standalone: {name} {said}: no finding to reproduce; "
                                 "nothing written")
    return seen


def first_script(setup: Setup, test_id: str,
                 first: StandaloneAnswer) -> tuple[StandaloneAnswer, Signature]:
    """The script of the case as built (``first``: the hook's answer with no expected
    signature yet), and the signature it shows here."""
    seen = observe_text(setup, first["text"], timeout_s=timeout_of(first))
    return first, a_finding(seen, case_name(test_id))


def timeout_of(answer: StandaloneAnswer) -> float:
    return answer.get("timeout_s", SCRIPT_TIMEOUT_S)


class NothingToReproduce(UsageError):
    """The case passes where it was built: exit 1, no script."""

    exit_code = 1


def write_text(text: str, out: Path) -> None:
    try:
        out.write_text(text, encoding="utf-8")
        out.chmod(0o755)
    except OSError as error:
        raise UsageError(f"--standalone: cannot write {out}: {error.strerror}") from error


def shrink_script(setup: Setup, test_id: str, answer: StandaloneAnswer, expected: Signature,
                  *, budget_s: float,
                  say: Callable[[str], object] = print) -> tuple[str, Signature, Shrunk]:
    """The script of the smallest case that still fails as ``expected`` says: its text,
    the signature it shows, and what was shrunk."""

    def seen_at(sizes: dict[str, int], shrunk: str = "") -> tuple[str, Signature]:
        text = ask(setup, test_id, expected, sizes, shrunk)["text"]
        return text, observe_text(setup, text, timeout_s=timeout_of(answer))

    def fails(sizes: dict[str, int]) -> bool:
        seen = seen_at(sizes)[1]
        same = same_failure(expected, seen)
        shown = ", ".join(f"{k} {v}" for k, v in sizes.items())
        say(f"minimize: {shown}: {describe_signature(seen)}"
            + ("" if same else " (not the finding)"))
        return same

    result = minimize(answer.get("sizes", {}), answer.get("steps", {}), fails,
                      budget_s=budget_s)
    seen = seen_at(result.sizes)[1]
    if not same_failure(expected, seen):  # a flaky trial: keep the case as built
        kept = ask(setup, test_id, expected)["text"]
        return kept, expected, Shrunk(result.start, result.start, result.trials,
                                      "the shrunk case no longer fails the same way")
    return ask(setup, test_id, seen, result.sizes, result.summary())["text"], seen, result
