"""A suite's ``standalone`` hook as harness calls it (harness/repro/standalone_hook.py) and the
case's arguments as a script holds them (harness/repro/standalone_dump.py): in this process,
a user's suite with its own ``harness_suite.py`` under a matrix that extends the shipped
``cpu`` one (tests/integration/test_byo_standalone.py walks the same through ``harness repro
--standalone``, and test_standalone.py the shipped suites' scripts)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from harness.repro.standalone_hook import HookCall, answer, checked, main

torch = pytest.importorskip("torch")
from harness.repro.standalone_dump import encode, shrink, sizes  # noqa: E402

# Two suites of the user's: "first" answers for nothing; "second" answers for its own test
# with the request as it got it, and refuses its other test as a suite says it has no script.
FIRST = '''
def standalone(test_id, request):
    return None
'''
SECOND = '''
import json


def standalone(test_id, request):
    if test_id.endswith("::test_refused"):
        raise ValueError("test_refused has no script: the reason\\nand more")
    if test_id.endswith("::test_lookup"):
        raise LookupError()
    if not test_id.startswith("second/"):
        return None
    seen = {"root": str(request.root), "matrix": request.matrix.name, "seed": request.seed,
            "origin": request.origin, "env": request.env, "pins": list(request.pins),
            "expected": request.expected, "shrink": request.shrink, "shrunk": request.shrunk}
    return {"text": json.dumps(seen), "sizes": {"rows": 9}, "timeout_s": 30}
'''
MATRIX = """extends: cpu
description: a user's suites with their own standalone hooks
suites:
  kernel_parity: {enabled: false}
  first: {path: first, workers: 1}
  second: {path: second, workers: 1}
  plain: {path: plain, workers: 1}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.harness]\n")
    for suite, hooks in (("first", FIRST), ("second", SECOND), ("plain", None)):
        (tmp_path / suite).mkdir()
        (tmp_path / suite / "test_x.py").write_text("def test_x():\n    pass\n")
        if hooks is not None:
            (tmp_path / suite / "harness_suite.py").write_text(hooks)
    (tmp_path / "mine.yaml").write_text(MATRIX)
    return tmp_path


def _call(root: Path, test_id: str, matrix: str = "mine.yaml") -> HookCall:
    return {"test_id": test_id, "root": str(root), "matrix_file": str(root / matrix),
            "seed": 7, "origin": "run folder r/1", "env": {"A": "1"}, "pins": ["eng==1.0"],
            "expected": {"kind": "mismatch"}, "shrink": {"rows": 2}, "shrunk": "rows 9 -> 2"}


def test_the_first_suite_that_answers_gives_the_script_with_the_request_it_got(
        project: Path) -> None:
    got = answer(_call(project, "second/test_x.py::test_x"))
    assert set(got) == {"text", "sizes", "steps", "timeout_s"}
    assert json.loads(got["text"]) == {
        "root": str(project), "matrix": "mine", "seed": 7, "origin": "run folder r/1",
        "env": {"A": "1"}, "pins": ["eng==1.0"], "expected": {"kind": "mismatch"},
        "shrink": {"rows": 2}, "shrunk": "rows 9 -> 2"}
    assert (got["sizes"], got["steps"], got["timeout_s"]) == ({"rows": 9}, {}, 30.0)


def test_a_test_no_suite_answers_for_names_the_suites_that_offer_a_script(
        project: Path) -> None:
    got = answer(_call(project, "plain/test_x.py::test_x"))
    assert got == {"error": "'plain/test_x.py::test_x' has no standalone script: no suite of "
                            "matrix mine offers one for it (suites with a standalone hook: "
                            "first, second; docs/byo-suite.md)"}
    (project / "first" / "harness_suite.py").unlink()
    (project / "second" / "harness_suite.py").unlink()
    assert "(suites with a standalone hook: none;" in answer(
        _call(project, "plain/test_x.py::test_x"))["error"]


def test_the_command_prints_one_json_line_and_its_exit_says_which(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def run(test_id: str, matrix: str = "mine.yaml") -> tuple[int, dict[str, str]]:
        code = main([json.dumps(_call(project, test_id, matrix))])
        out = capsys.readouterr().out
        assert out.count("\n") == 1
        return code, json.loads(out)

    code, got = run("second/test_x.py::test_x")
    assert code == 0 and "text" in got
    assert run("plain/test_x.py::test_x")[0] == 2
    # a suite's refusal: its first line; one with no words: what it raised
    assert run("second/test_x.py::test_refused") == (
        2, {"error": "test_refused has no script: the reason"})
    assert run("second/test_x.py::test_lookup") == (2, {"error": "LookupError()"})
    code, got = run("second/test_x.py::test_x", matrix="missing.yaml")  # harness's own error
    assert code == 3 and set(got) == {"failed"} and "missing.yaml" in got["failed"]


@pytest.mark.parametrize("got", [None, "text", {"sizes": {}}, {"text": 1}])
def test_an_answer_that_is_no_script_is_a_type_error_naming_the_suite(got: object) -> None:
    with pytest.raises(TypeError, match=f"suite mine: standalone\\(\\) returned "
                                        f"{type(got).__name__}, not None or a dict"):
        checked("mine", got)


def test_an_answer_keeps_what_it_can_read_of_each_key() -> None:
    assert checked("s", {"text": "t"}) == {"text": "t", "sizes": {}, "steps": {}}
    got = checked("s", {"text": "t", "sizes": {"rows": 9, 3: 4, "w": "8", "f": 1.5},
                        "steps": [1], "unshrinkable": "why", "timeout_s": 5})
    assert got == {"text": "t", "sizes": {"rows": 9, "3": 4}, "steps": {},
                   "unshrinkable": "why", "timeout_s": 5.0}
    assert isinstance(got["timeout_s"], float)
    got = checked("s", {"text": "t", "steps": {"rows": 1}, "unshrinkable": 3,
                        "timeout_s": "5"})
    assert got == {"text": "t", "sizes": {}, "steps": {"rows": 1}}
    assert checked("s", {"text": "t", "timeout_s": 2.5})["timeout_s"] == 2.5


# -- the arguments, exactly ----------------------------------------------------------------

def _rebuilt(spec: dict[str, object]) -> object:
    """What a script makes of one argument (its ``tensor()`` does the same)."""
    raw = base64.b64decode(str(spec["b64"]))
    dtype = getattr(torch, str(spec["tensor"]))
    storage = torch.frombuffer(bytearray(raw), dtype=dtype) if raw else torch.empty(0, dtype=dtype)
    return torch.as_strided(storage, spec["shape"], spec["stride"], spec["offset"])


def test_a_strided_view_is_written_as_its_bytes_up_to_its_last_element() -> None:
    base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    view = base[1:5, 2:8:2]  # offset 12, strides (10, 2)
    spec = encode(view)
    assert (spec["tensor"], spec["shape"], spec["stride"], spec["offset"]) == (
        "float32", [4, 3], [10, 2], 12)
    reach = 12 + 3 * 10 + 2 * 2 + 1  # the last element the view reaches, and no further
    assert len(base64.b64decode(spec["b64"])) == reach * 4
    assert torch.equal(_rebuilt(dict(spec)), view)
    bf16 = torch.linspace(-2, 2, 8, dtype=torch.bfloat16)
    assert torch.equal(_rebuilt(dict(encode(bf16))), bf16)


def test_an_empty_tensor_a_dtype_and_plain_values() -> None:
    assert encode(torch.empty(0, 4))["b64"] == ""
    assert encode(torch.float16) == {"dtype": "float16"}
    for value in (None, True, 3, 1.5, "x"):
        assert encode(value) == {"value": value}
    with pytest.raises(TypeError, match="cannot write a list argument into a script"):
        encode([1])


def test_sizes_and_shrinking_take_the_axes_the_hook_names() -> None:
    x, w = torch.zeros(9, 96), torch.zeros(96)
    scalar = torch.zeros(1)
    axes = ((2, 0, "rows"), (0, 0, "rows"), (0, 1, "width"), (1, 0, "width"))
    args = (x, w, scalar)
    assert sizes(axes, args) == {"rows": 9, "width": 96}  # a one-element tensor has none
    small = shrink(axes, args, {"rows": 2, "width": 200})
    assert small[0].shape == (2, 96) and small[1].shape == (96,) and small[2] is scalar
    assert small[0].data_ptr() == x.data_ptr()  # a view of the same storage
    assert shrink(axes, args, {"width": 8})[0].shape == (9, 8)
    assert sizes(((0, 0, "n"),), (3,)) == {}
    pair = torch.zeros(2)  # two elements: a size to shrink (one is none)
    assert sizes(((0, 0, "n"),), (pair,)) == {"n": 2}
    assert shrink(((0, 0, "n"),), (pair,), {"n": 1})[0].shape == (1,)
