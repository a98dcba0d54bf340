"""A suite's ``standalone`` hook, called where its script is made: ``harness repro --standalone``.

``python -m harness.repro.standalone_hook REQUEST_JSON``, in the matrix's environment (the
hook may import torch and the suite's modules; harness never does at start-up), asks each
suite of the matrix that offers the hook (platform/suite_hooks.py) for the test id's script,
and prints the first answer as one JSON line: ``standalone(test_id, request)`` returns None
for a test id that is not its own, a ``StandaloneAnswer`` (the whole script's text, with
``request.expected`` written in as the expected signature) for one with a script, and raises
ValueError or LookupError (a one-line reason) for one of its own without a script
(docs/byo-suite.md, "A suite's hooks").
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from harness.errors import HarnessError
from harness.matrix.loader import load_matrix
from harness.matrix.model import Matrix
from harness.platform.suite_hooks import hooks_of
from harness.repro.standalone_render import Signature

HOOK = "standalone"


@dataclass(frozen=True)
class StandaloneRequest:
    """What a suite's ``standalone`` hook is given beside the test id."""

    root: Path  # the project root, whose files the script's code is taken from
    matrix: Matrix  # the matrix the case runs under (its tolerances, dtypes, ...)
    seed: int  # the run's seed (0 under --matrix)
    origin: str  # what the script is made from, for its docstring
    env: dict[str, str]  # what the script sets before it starts (the matrix's runtime env)
    pins: tuple[str, ...]  # the requirements of the environment it is seen in
    expected: Signature  # the signature to write in ({"kind": "?"} before the first run)
    shrink: dict[str, int]  # the sizes to shrink the case to ({}: as built)
    shrunk: str  # what --minimize shrank ("rows 9 -> 2"), for the docstring ("": nothing)


class StandaloneAnswer(TypedDict, total=False):
    """A hook's answer: the script's text, the sizes --minimize may shrink (as built) with
    each size's step, why there are none, and how long one run of the script may take."""

    text: str
    sizes: dict[str, int]
    steps: dict[str, int]
    unshrinkable: str
    timeout_s: float
    error: str  # set here: the hook's refusal, or no suite offering a script (exit 2)
    failed: str  # set here: the hooks could not be loaded (exit 3)


class HookCall(TypedDict):
    """What the harness process sends: the request, with the matrix as its resolved JSON."""

    test_id: str
    root: str
    matrix_file: str
    seed: int
    origin: str
    env: dict[str, str]
    pins: list[str]
    expected: Signature
    shrink: dict[str, int]
    shrunk: str


def _sizes(value: object) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int)}


def checked(suite: str, got: object) -> StandaloneAnswer:
    """A hook's return value as an answer; TypeError where it is not one."""
    if not isinstance(got, dict) or not isinstance(got.get("text"), str):
        raise TypeError(f"suite {suite}: standalone() returned {type(got).__name__}, not "
                        "None or a dict with the script's 'text'")
    answer: StandaloneAnswer = {"text": str(got["text"]), "sizes": _sizes(got.get("sizes")),
                                "steps": _sizes(got.get("steps"))}
    if isinstance(got.get("unshrinkable"), str):
        answer["unshrinkable"] = str(got["unshrinkable"])
    if isinstance(got.get("timeout_s"), int | float):
        answer["timeout_s"] = float(got["timeout_s"])
    return answer


def answer(call: HookCall) -> StandaloneAnswer:
    root = Path(call["root"])
    matrix = load_matrix(Path(call["matrix_file"]), root)
    request = StandaloneRequest(root=root, matrix=matrix, seed=int(call["seed"]),
                                origin=call["origin"], env=dict(call["env"]),
                                pins=tuple(call["pins"]), expected=call["expected"],
                                shrink=dict(call["shrink"]), shrunk=call["shrunk"])
    for hooks in hooks_of(matrix, root, HOOK):
        got = hooks.module.standalone(call["test_id"], request)
        if got is not None:
            return checked(hooks.suite, got)
    offering = ", ".join(h.suite for h in hooks_of(matrix, root, HOOK)) or "none"
    return {"error": f"{call['test_id']!r} has no standalone script: no suite of matrix "
                     f"{matrix.name} offers one for it (suites with a standalone hook: "
                     f"{offering}; docs/byo-suite.md)"}


def main(argv: list[str]) -> int:
    try:
        got = answer(json.loads(argv[0]))
    except (LookupError, ValueError) as error:  # the hook's refusal, one line
        print(json.dumps({"error": (str(error).strip().splitlines() or [repr(error)])[0]}))
        return 2
    except HarnessError as error:
        print(json.dumps({"failed": str(error)}))
        return 3
    print(json.dumps(got))
    return 2 if "error" in got else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
