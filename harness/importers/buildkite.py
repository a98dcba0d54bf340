"""A Buildkite step file in vLLM's format (``.buildkite/hardware_tests/cpu.yaml``) read as
the pytest runs its steps make: one ``ImportedSuite`` per pytest command, and one line for
each thing the matrix has no place for. Pure: reads one file, runs nothing.

A step's command is a runner script with the test command as its quoted argument::

    bash .buildkite/scripts/hardware_ci/run-cpu-test.sh 30m "
    pytest -x -v -s --num-shards=$$BUILDKITE_PARALLEL_JOB_COUNT --shard-id=... tests/a.py"

The runner (its image build, its time limit) is the lane's business here; the pytest
argv, less the shard flags (harness shards by its own plan), is the suite. The argv is read
as pytest reads it (``pytest_argv.py``: pytest's own table of which option takes a value).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

import yaml

from harness.errors import UsageError
from harness.importers.pytest_argv import option_table, read_argv

SHARD_FLAGS = ("--num-shards", "--shard-id")
# the suite keys these options set
ROUTED: dict[str, Literal["markers", "k"]] = {"-m": "markers", "-k": "k"}
RUNNER_TIMEOUT = re.compile(r"^(\d+)([smh])$")
ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
UNIT_S = {"s": 1, "m": 60, "h": 3600}


@dataclass(frozen=True, kw_only=True)
class ImportedSuite:
    """One pytest command of one step, as the matrix's suite keys say it."""

    name: str
    step: str  # the step's key (else its label)
    label: str
    targets: tuple[str, ...]  # files, folders and node ids, relative to the source root
    markers: str = ""
    k: str = ""
    ignores: tuple[str, ...] = ()
    options: tuple[str, ...] = ()  # the step's other pytest flags (-x -v -s), in order
    timeout_s: int | None = None
    shards: int = 1
    soft_fail: bool = False
    device: str | None = None
    source_file_dependencies: tuple[str, ...] = ()

    def pytest_args(self, path: str) -> list[str]:
        """What the suite's ``pytest_args`` carry beside its ``path``: the other targets,
        the ignores, the step's flags."""
        rest = list(self.targets)
        rest.remove(path)
        return [*rest, *(f"--ignore={i}" for i in self.ignores), *self.options]


class PytestCommand(TypedDict):
    """One pytest command's argv as ``parse_pytest`` reads it."""

    targets: list[str]
    markers: str
    k: str
    ignores: list[str]
    options: list[str]


@dataclass(frozen=True, kw_only=True)
class Imported:
    file: Path
    suites: tuple[ImportedSuite, ...]
    unmapped: tuple[str, ...]  # one line each: what the matrix has no place for


def read_steps(file: Path) -> list[dict[str, object]]:
    """Every step of the file (groups walked), or a UsageError naming the file."""
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise UsageError(f"{file}: cannot read: {error.strerror}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{file}{where}: not YAML: {getattr(error, 'problem', error)}") from None
    if isinstance(data, list):
        data = {"steps": data}
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise UsageError(f"{file}: steps: a Buildkite step file has a list of steps")
    steps: list[dict[str, object]] = []
    for step in data["steps"]:
        if isinstance(step, dict) and isinstance(step.get("steps"), list):  # a group
            steps += [s for s in step["steps"] if isinstance(s, dict)]
        elif isinstance(step, dict):
            steps.append(step)
    return steps


def step_id(step: Mapping[str, object]) -> str:
    return str(step.get("key") or step.get("label") or "?")


def pick(file: Path, steps: list[dict[str, object]],
         wanted: Sequence[str]) -> list[dict[str, object]]:
    if not wanted:
        return steps
    chosen = []
    for want in wanted:
        match = [s for s in steps if want in (s.get("key"), s.get("label"))]
        if not match:
            known = ", ".join(step_id(s) for s in steps)
            raise UsageError(f"{file}: step {want!r}: no step has this label or key "
                             f"(it has: {known})")
        chosen += match
    return chosen


def _suite_name(step: Mapping[str, object], index: int) -> str:
    base = _slug(step_id(step)) or "step"
    return base if index == 0 else f"{base}_{index + 1}"


def _runner_parts(command: str) -> tuple[list[str], int | None]:
    """The test command's lines inside the runner script's quoted argument, and the
    runner's time limit (``30m``); a command that is no runner call is its own line."""
    command = command.replace("\\\n", " ")  # a shell line continuation
    head, command = _setup_lines(command)  # lines before the runner call (exports, an if)
    try:
        words = shlex.split(command)
    except ValueError:
        return head + command.splitlines(), None
    if len(words) >= 4 and words[0] == "bash" and words[1].endswith(".sh"):
        limit = RUNNER_TIMEOUT.match(words[2])
        timeout = int(limit[1]) * UNIT_S[limit[2]] if limit else None
        inner = " ".join(words[3:]).replace("\\\n", " ")
        return head + [line for line in inner.splitlines() if line.strip()], timeout
    return head + [line for line in command.splitlines() if line.strip()], None


def parse_pytest(words: list[str], where: str, unmapped: list[str]) -> PytestCommand:
    """pytest's argv (after ``pytest``) split into targets, -m, -k, ignores and the other
    options (each with its value, in order), read with pytest's own table of options; the
    shard flags are dropped. An option pytest here does not know is kept as a flag and
    named in ``unmapped``."""
    out: PytestCommand = {"targets": [], "markers": "", "k": "", "ignores": [], "options": []}
    table = {**dict.fromkeys(SHARD_FLAGS), **option_table()}  # pytest-shard's take a value
    for arg in read_argv(words, table):
        if not arg.option:
            out["targets"] += arg.words
        elif arg.missing:
            _note(unmapped, f"{where}: {arg.option}: takes a value and none follows, not kept")
        elif arg.option in ROUTED:  # these and --ignore take a value: not missing, it is set
            out[ROUTED[arg.option]] = arg.value or ""
        elif arg.option == "--ignore":
            out["ignores"].append(arg.value or "")
        elif arg.option not in SHARD_FLAGS:
            if not arg.known:
                _note(unmapped, f"{where}: {arg.option}: not an option of pytest here (a "
                                "plugin not installed?), read as a flag without a value")
            out["options"] += arg.words
    return out


def _listed(value: object) -> list[object]:
    """``list(value)`` of a value as the step file has it (its TypeError if no list)."""
    if isinstance(value, Iterable):
        return list(value)
    raise TypeError(f"{type(value).__name__!r} object is not iterable")


def _text(value: object) -> str | None:
    """A value the matrix keeps as a comment only (the step's device): as the comment
    writes it, None for one it leaves out."""
    if isinstance(value, str) or value is None:
        return value
    return str(value) if value else None


def _int(value: object) -> int:
    """``int(value)`` of a value as the step file has it (its TypeError if no number)."""
    if isinstance(value, str | bytes | int | float):
        return int(value)
    raise TypeError("int() argument must be a string, a bytes-like object or a real number, "
                    f"not {type(value).__name__!r}")


def _note(unmapped: list[str], line: str) -> None:
    if line not in unmapped:  # a step's commands share their flags: said once
        unmapped.append(line)


def narrow(suites: list[ImportedSuite], only: Sequence[str], unmapped: list[str],
           file: Path) -> list[ImportedSuite]:
    """Each suite's targets cut to those under ``only`` (a file or folder of the step's),
    the cut named; a suite left with none is dropped, and named."""
    kept = []
    for suite in suites:
        targets = tuple(t for t in suite.targets
                        if any(t == o or t.startswith((o.rstrip("/") + "/", o + "::"))
                               for o in only))
        if len(targets) < len(suite.targets):
            unmapped.append(f"{file}: step {suite.step}: --only leaves out "
                            f"{len(suite.targets) - len(targets)} of {len(suite.targets)} "
                            "targets")
        if targets:
            kept.append(dataclasses.replace(suite, targets=targets))
    return kept


def per_file(suites: list[ImportedSuite]) -> list[ImportedSuite]:
    """Each suite split into one suite per test file (a file's node ids stay together),
    named after the file: a file that dies at collection (a SIGILL on import) or hangs
    takes only its own suite, and the report shows the step file by file. The step's flags
    (``-x`` included) apply within each file. Files of one name are told apart by their
    folders; a name another suite has taken is prefixed with the suite's."""
    out: list[ImportedSuite] = []
    taken: set[str] = set()
    for suite in suites:
        files: dict[str, list[str]] = {}
        for target in suite.targets:
            files.setdefault(target.split("::", 1)[0], []).append(target)
        for targets, name in zip(files.values(), file_names(list(files)), strict=True):
            name = unique(name if name not in taken else f"{suite.name}_{name}", taken)
            out.append(dataclasses.replace(suite, name=name, targets=tuple(targets)))
    return out


def file_names(paths: list[str]) -> list[str]:
    """Each path's name: its file's stem, with as many of its folders as tell it apart
    from the others' (tests/a/test_x.py and tests/b/test_x.py: a_test_x, b_test_x)."""
    words = [[w for w in map(_slug, path.rstrip("/").removesuffix(".py").split("/")) if w]
             or ["tests"] for path in paths]
    depth = [1] * len(paths)
    while True:
        names = ["_".join(w[-d:]) for w, d in zip(words, depth, strict=True)]
        grow = [i for i, name in enumerate(names)
                if names.count(name) > 1 and depth[i] < len(words[i])]
        if not grow:
            return names
        for i in grow:
            depth[i] += 1


def unique(name: str, taken: set[str]) -> str:
    """``name``, else ``name_2``, ``name_3``...: the first not taken, then taken; no two
    suites of one import share a name (the second would replace the first)."""
    chosen, count = name, 1
    while chosen in taken:
        count += 1
        chosen = f"{name}_{count}"
    taken.add(chosen)
    return chosen


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def import_steps(file: Path, wanted: Sequence[str] = (), only: Sequence[str] = (), *,
                 split: bool = False, read: list[dict[str, object]] | None = None) -> Imported:
    """The chosen steps (default: all) as suites (their targets cut to ``only`` if given;
    with ``split``, one suite per file), and what did not map, one line each. ``read``:
    the file's steps where the caller has read them already (``read_steps``)."""
    steps = pick(file, read_steps(file) if read is None else read, wanted)
    suites: list[ImportedSuite] = []
    unmapped: list[str] = []
    for step in steps:
        made = _one_step(file, step, unmapped)
        if not made:
            where = f"{file}: step {step_id(step)}: commands: no pytest command"
            if wanted:
                raise UsageError(where)
            unmapped.append(f"{where} (not imported)")
        suites += made
    taken: set[str] = set()  # two steps of one label (no key) would share a name
    suites = [dataclasses.replace(s, name=unique(s.name, taken)) for s in suites]
    if only:
        suites = narrow(suites, only, unmapped, file)
        if not suites:
            raise UsageError(f"{file}: --only {' '.join(only)}: no chosen step runs it")
    if split:
        suites = per_file(suites)
    return Imported(file=file, suites=tuple(suites), unmapped=tuple(unmapped))


def _one_step(file: Path, step: Mapping[str, object], unmapped: list[str]) -> list[ImportedSuite]:
    sid = step_id(step)
    where = f"{file}: step {sid}"
    given = step.get("commands") or step.get("command") or []
    commands = [given] if isinstance(given, str) else _listed(given)
    found: list[PytestCommand] = []
    timeout = _int(step["timeout_in_minutes"]) * 60 if step.get("timeout_in_minutes") else None
    for command in commands:
        lines, limit = _runner_parts(str(command))
        timeout = timeout or limit
        for line in lines:
            try:
                words = shlex.split(line)
            except ValueError as error:
                unmapped.append(f"{where}: not read as a shell line ({error}): {line.strip()}")
                continue
            # the env words before the command (``-o key=value`` after it is pytest's)
            env = list(itertools.takewhile(ENV_WORD.match, words))
            rest = words[len(env):]
            if rest[:1] == ["pytest"] or rest[:3] == ["python", "-m", "pytest"]:
                if env:
                    unmapped.append(f"{where}: env set inline, not kept: {' '.join(env)}")
                found.append(parse_pytest(rest[1:] if rest[0] == "pytest" else rest[3:],
                                          where, unmapped))
            elif words:
                unmapped.append(f"{where}: not a pytest command, not run: {line.strip()}")
    for key in ("device", "source_file_dependencies", "env", "agents", "depends_on"):
        if step.get(key):
            unmapped.append(f"{where}: {key}: no place in a matrix suite, kept as a comment")
    device = _text(step.get("device"))
    return [
        ImportedSuite(
            name=_suite_name(step, i), step=sid, label=str(step.get("label", sid)),
            targets=tuple(f["targets"]), markers=f["markers"], k=f["k"],
            ignores=tuple(f["ignores"]), options=tuple(f["options"]), timeout_s=timeout,
            shards=_int(step.get("parallelism") or 1), soft_fail=step.get("soft_fail") is True,
            device=device,
            source_file_dependencies=tuple(str(d) for d in _listed(
                step.get("source_file_dependencies") or ())),
        )
        for i, f in enumerate(found) if f["targets"]
    ]


_RUNNER_CALL = re.compile(r"\s*bash\s+\S+\.sh(\s|$)")


def _setup_lines(command: str) -> tuple[list[str], str]:
    """A command of several shell lines whose runner call comes after others (vLLM's Zen
    steps export the image's registry first): (the lines before the call, comments left
    out; the call to the end). A command with no such call, or starting with it, is all call."""
    lines = command.splitlines()
    at = next((i for i, line in enumerate(lines) if _RUNNER_CALL.match(line)), None)
    if not at:
        return [], command
    head = [line for line in lines[:at] if line.strip() and not line.lstrip().startswith("#")]
    return head, "\n".join(lines[at:])
