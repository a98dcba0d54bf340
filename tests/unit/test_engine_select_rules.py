"""The rules of selection from an engine source change, each side of each: the parsers of
registrations, definitions and diffs on the shapes vLLM's sources do not all show, and
by_ops.py's answers (a lane's record stale, absent, of another build; files of no role).
The real engine's sources are tests/integration/test_native_map.py's."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.select.by_ops import EngineLane, derive_engine
from harness.select.engine_change import EngineChange, compare_trees, parse_diff, read_change
from harness.select.native import Reach, defines, read_native, read_registrations
from harness.select.rules import LaneSelection, Rule, dump_lane, load_lane

BINDINGS = """\
#include "ops.h"
#define TORCH_EXTENSION_NAME _C
// ops.def("commented_out(Tensor x) -> ()");
void twice(torch::Tensor& out, const torch::Tensor& x);

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("twice(Tensor! out, Tensor x) -> ()");
  ops.impl("twice", torch::kCPU, &twice);
  ops.def("helper.out(Tensor x)"
          " -> Tensor", &cpu_utils::helper_impl);
}

TORCH_LIBRARY_EXPAND(CONCAT(TORCH_EXTENSION_NAME, _cache_ops), cache_ops) {
  cache_ops.def("swap(Tensor a) -> ()");
  cache_ops.impl("swap", torch::kCPU, &swap_blocks);
}
"""


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def test_registrations_name_their_namespace_op_and_functions() -> None:
    calls = read_registrations("csrc/cpu/torch_bindings.cpp", BINDINGS)
    assert [(c.op, c.functions, c.lines) for c in calls] == [
        ("_C::twice", (), (7, 7)),
        ("_C::twice", ("twice",), (8, 8)),
        ("_C::helper", ("helper_impl",), (9, 10)),
        ("_C_cache_ops::swap", (), (14, 14)),
        ("_C_cache_ops::swap", ("swap_blocks",), (15, 15))]


def test_a_definition_is_a_body_not_a_call_or_a_declaration() -> None:
    code = """
    void declared(int x);
    int called = other(declared_too(3));
    void plain(int x) { }
    void qualified::method(int x) const noexcept { }
    Holder::Holder(int x) : a_(x), b_(f(x)) { }
    auto trailing(int x) -> int { return x; }
    template <typename T> void templ<T>(T x) { }
    """
    assert defines(code) >= {"plain", "method", "Holder", "trailing", "templ"}
    assert not defines(code) & {"declared", "other", "declared_too"}


def test_a_diff_counts_the_lines_it_changes_not_its_context(tmp_path: Path) -> None:
    base = _tree(tmp_path / "vllm-1.0", {"csrc/cpu/a.cpp": "1\n2\n3\n4\n5\n6\n7\n8\n",
                                         "csrc/cpu/b.cpp": "x\n", "setup.py": "y\n"})
    diff = textwrap.dedent("""\
        --- vllm-1.0/csrc/cpu/a.cpp
        +++ vllm-1.1/csrc/cpu/a.cpp
        @@ -1,8 +1,8 @@
         1
        -2
        +two
         3
         4
         5
         6
        +6.5
         7
         8
        --- a/csrc/cpu/b.cpp
        +++ /dev/null
        @@ -1 +0,0 @@
        -x
        --- /dev/null
        +++ b/csrc/cpu/new.cpp
        @@ -0,0 +1 @@
        +z
        Binary files a/setup.py and b/setup.py differ
        """)
    changed, added = parse_diff(diff, base)
    assert changed == {"csrc/cpu/a.cpp": ((2, 2), (6, 7)), "csrc/cpu/b.cpp": None,
                       "csrc/cpu/new.cpp": None, "setup.py": None}
    assert added == {"csrc/cpu/new.cpp"}


def test_two_trees_compare_file_by_file(tmp_path: Path) -> None:
    old = _tree(tmp_path / "old", {"csrc/a.cpp": "1\n2\n3\n", "same.txt": "s\n",
                                   "gone.h": "g\n"})
    new = _tree(tmp_path / "new", {"csrc/a.cpp": "1\nb\n3\n", "same.txt": "s\n",
                                   "born.h": "b\n"})
    changed, added = compare_trees(old, new)
    assert changed == {"csrc/a.cpp": ((2, 2),), "gone.h": None, "born.h": None}
    assert added == {"born.h"}


def test_a_change_that_is_none_of_the_three_is_refused_in_one_line(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "e", {"csrc/cpu/a.cpp": "x\n"})
    with pytest.raises(UsageError, match=r"--engine-change HEAD~1: expected a diff"):
        read_change(str(tree), "HEAD~1")
    with pytest.raises(UsageError, match=r"--engine-source .*nowhere: no such folder"):
        read_change(str(tmp_path / "nowhere"), str(tree))


def _change(tree: Path, changed: dict[str, tuple[tuple[int, int], ...] | None],
            release: str = "1.0") -> EngineChange:
    return EngineChange(source=tree, label=str(tree), changed=changed, added=frozenset(),
                        release=release, name="eng")


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    return _tree(tmp_path / "eng", {
        "csrc/cpu/torch_bindings.cpp": BINDINGS,
        "csrc/cpu/twice.cpp": '#include "vec.hpp"\nvoid twice(torch::Tensor& o, '
                              'const torch::Tensor& x) { o = x * 2; }\n',
        "csrc/cpu/vec.hpp": "inline int lanes() { return 8; }\n",
        "csrc/cpu/swap.cpp": "void swap_blocks(torch::Tensor& a) { }\n",
        "csrc/twice.cu": "void twice(torch::Tensor& o, const torch::Tensor& x) { }\n",
        "csrc/torch_bindings.cpp": BINDINGS.replace("torch::kCPU", "torch::kCUDA"),
    })


def _lane(name: str = "eng-cpu", family: str = "cpu", runs: int = 3,
          release: str | None = "1.0", runs_engine: bool = True) -> EngineLane:
    return EngineLane(name=name, family=family, runs_engine=runs_engine, runs=runs,
                      release=release, tests={"_C::twice": frozenset({"s/t.py::test_twice"}),
                                              "_C_cache_ops::swap": frozenset()})


def test_a_header_selects_the_tests_that_called_the_ops_it_reaches(engine: Path) -> None:
    part = derive_engine(_change(engine, {"csrc/cpu/vec.hpp": None}), read_native(engine),
                         [_lane(), _lane("other", runs_engine=False)])
    (rule,) = part.rules["eng-cpu"]
    assert (rule.kind, rule.ids, rule.ops) == ("tests", ("s/t.py::test_twice",), ("_C::twice",))
    assert "other" not in part.rules and not part.full


def test_a_cuda_source_selects_nothing_on_a_cpu_lane(engine: Path) -> None:
    native = read_native(engine)
    part = derive_engine(_change(engine, {"csrc/twice.cu": None}), native,
                         [_lane(), _lane("eng-gpu", family="gpu")])
    assert "eng-cpu" not in part.rules and part.rules["eng-gpu"][0].ids


def test_an_op_no_test_called_is_said(engine: Path) -> None:
    part = derive_engine(_change(engine, {"csrc/cpu/swap.cpp": None}), read_native(engine),
                         [_lane()])
    assert not part.rules and part.notes == [
        ("csrc/cpu/swap.cpp", "eng-cpu: no test called _C_cache_ops::swap in its recorded runs")]


@pytest.mark.parametrize(("runs", "release", "full"), [
    (0, "1.0", "no op record of this lane in the history yet (run it once, then select)"),
    (3, "0.9", "its op record is of eng 0.9, older than the change's base 1.0"),
    (3, "1.0", None), (3, "1.1", None), (3, None, None)])
def test_a_lane_without_a_current_record_runs_in_full(engine: Path, runs: int,
                                                      release: str | None,
                                                      full: str | None) -> None:
    part = derive_engine(_change(engine, {"csrc/cpu/twice.cpp": None}), read_native(engine),
                         [_lane(runs=runs, release=release)])
    if full is None:
        assert not part.full and part.rules["eng-cpu"]
    else:
        assert part.full == {"eng-cpu": [("csrc/cpu/twice.cpp", full)]} and not part.rules


@pytest.mark.parametrize(("path", "full"), [
    ("CMakeLists.txt", "no rule knows what it changes (a build file, a file of unknown role)"),
    ("csrc/cpu/orphan.cpp", "no registration, definition or include places it"),
    ("eng/model.py", "a Python file of the engine (its import graph is not read): the lanes "
                     "that run the engine"),
    ("docs/cpu.md", None), ("tests/kernels/test_x.py", None)])
def test_what_no_op_can_answer(engine: Path, path: str, full: str | None) -> None:
    part = derive_engine(_change(engine, {path: None}), read_native(engine),
                         [_lane(), _lane("other", runs_engine=False)])
    if full is None:
        assert not part.full and part.notes[0][0] == path
    else:
        assert part.full == {"eng-cpu": [(path, full)]}


def test_the_registration_file_selects_by_the_lines_changed(engine: Path) -> None:
    native = read_native(engine)
    one = derive_engine(_change(engine, {"csrc/cpu/torch_bindings.cpp": ((15, 15),)}), native,
                        [_lane()])
    assert not one.rules and one.notes[0][1].endswith("_C_cache_ops::swap in its recorded runs")
    every = derive_engine(_change(engine, {"csrc/cpu/torch_bindings.cpp": ((1, 1),)}), native,
                          [_lane()])
    assert every.rules["eng-cpu"][0].ops == ("_C::twice",)


def test_a_tests_rule_travels_to_the_run(tmp_path: Path) -> None:
    lane = LaneSelection(lane="eng-cpu", rules=(Rule(kind="tests", source="csrc/cpu/a.cpp",
                                                     why="w", ids=("s/t.py::test_a[x]",),
                                                     ops=("_C::a",)),))
    dump_lane(lane, tmp_path / "sel.json")
    back = load_lane(tmp_path / "sel.json")
    assert back == lane
    assert back.selects("s/t.py::test_a[x]") and not back.selects("s/t.py::test_a[y]")
    assert back.suites({"s": "s", "other": "o"}) == ["s"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "select", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def test_bad_input_is_one_line_each(tmp_path: Path, engine: Path) -> None:
    not_engine = _tree(tmp_path / "lib", {"src/a.cpp": "int a() { return 1; }\n"})
    diff = tmp_path / "x.diff"
    diff.write_text("--- a/src/a.cpp\n+++ b/src/a.cpp\n@@ -1 +1 @@\n-int a\n+int b\n")
    cases = {
        ("--engine-source", str(not_engine), "--engine-change", str(diff)):
            f"harness: error: --engine-source {not_engine}: not an engine's source tree (no "
            "TORCH_LIBRARY registration under csrc/)",
        ("--engine-source", str(engine)):
            "harness: error: --engine-source needs --engine-change (the engine's source, and "
            "its change)",
        ("--explain",):
            "harness: error: harness select: give --changed-since REF, or --engine-source "
            "TREE --engine-change CHANGE (or both)",
    }
    for args, line in cases.items():
        done = _cli(*args)
        assert (done.returncode, done.stdout, done.stderr.strip().splitlines()) == (
            2, "", [line]), args


def test_a_revision_of_a_git_checkout_is_the_change_since_its_merge_base(engine: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(engine), *args], capture_output=True, text=True,
                              check=True).stdout

    git("init", "-q")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "base", "--allow-empty")
    git("add", "-A")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "engine")
    vec = engine / "csrc/cpu/vec.hpp"
    vec.write_text(vec.read_text() + "inline int more() { return 16; }\n")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qam", "a pull request")
    change = read_change(str(engine), "HEAD~1")
    assert dict(change.changed) == {"csrc/cpu/vec.hpp": ((1, 2),)}
    part = derive_engine(change, read_native(engine), [_lane()])
    assert part.rules["eng-cpu"][0].ids == ("s/t.py::test_twice",)


def test_without_metadata_the_package_is_the_tree_s_one_python_package(engine: Path) -> None:
    from harness.select.by_ops import engine_package

    change = replace(_change(engine, {"eng/model.py": None}), name=None)
    assert engine_package(change) == ""  # no package folder yet: not guessed
    _tree(engine, {"eng/__init__.py": "", "tests/__init__.py": ""})
    assert engine_package(change) == "eng"
    part = derive_engine(change, read_native(engine), [_lane()])
    assert part.full["eng-cpu"][0][1].startswith("a Python file of the engine")


def test_each_link_of_the_map_is_needed(tmp_path: Path) -> None:
    # op() is defined in a.cpp; each other source reaches it through one rule only
    tree = _tree(tmp_path / "e", {
        "csrc/cpu/torch_bindings.cpp": """\
            TORCH_LIBRARY(_C, ops) {
              ops.def("op(Tensor x) -> ()",
                      &op);
              ops.def("other(Tensor x) -> ()", &other);
            }
            """,
        # a commented-out include is no edge
        "csrc/cpu/a.cpp": '#include "h1.h"\n#include "handler.hpp"\n'
                          '// #include "stale.h"\nvoid op(int x) { f1(x); }\n',
        "csrc/cpu/stale.h": "inline int stale() { return 0; }\n",
        "csrc/cpu/other.cpp": "void other(int x) { }\n",
        # helper of a helper of a helper: three rounds of the declared-in-a-header rule
        "csrc/cpu/h1.h": "void f1(int x);\n",
        "csrc/cpu/b.cpp": '#include "h2.h"\nvoid f1(int x) { f2(x); }\n',
        "csrc/cpu/h2.h": "void f2(int x);\n",
        "csrc/cpu/c.cpp": '#include "h3.h"\nvoid f2(int x) { f3(x); }\n',
        "csrc/cpu/h3.h": "void f3(int x);\n",
        "csrc/cpu/d.cpp": "void f3(int x) { }\n",
        # the implementation beside a header that declares nothing the rules read
        "csrc/cpu/handler.hpp": "struct Handler { Handler(int); };\n",
        "csrc/cpu/handler.cpp": "Handler::Handler(int x) { }\n",
        # a generator script writes its includes mid-line
        "csrc/cpu/gen.py": "out.write('#include \"g.hpp\"')  # writes generated.h\n",
        "csrc/cpu/g.hpp": "inline int g() { return 1; }\n",
        "csrc/cpu/other_user.cpp": '#include "generated.h"\nvoid unused(int x) { }\n',
    })
    native = read_native(tree)
    op = frozenset({Reach("cpu", "_C::op")})
    for path in ("csrc/cpu/a.cpp", "csrc/cpu/h1.h", "csrc/cpu/b.cpp", "csrc/cpu/c.cpp",
                 "csrc/cpu/d.cpp", "csrc/cpu/handler.cpp"):
        assert native.reach(path) == op, path
    assert native.reach("csrc/cpu/stale.h") is None
    assert native.sources[Reach("cpu", "_C::op")] == {"csrc/cpu/a.cpp"}
    assert native.sources[Reach("cpu", "_C::other")] == {"csrc/cpu/other.cpp"}
    # the registration file by lines: a call spanning lines 2-3, touched from either side
    bindings = "csrc/cpu/torch_bindings.cpp"
    both = {"_C::op", "_C::other"}
    for lines, ops in ((((3, 3),), {"_C::op"}), (((1, 2),), None), (((3, 4),), both),
                       (((4, 9),), None), (((4, 4),), {"_C::other"}), (((2, 2),), {"_C::op"})):
        got = {r.op for r in native.reach(bindings, lines) or ()}
        assert got == (ops or {"_C::op", "_C::other"}), lines


def _two_sides(tmp_path: Path) -> tuple[Path, Path]:
    old = _tree(tmp_path / "old", {
        "csrc/k.cpp": "".join(f"line {i}\n" for i in range(1, 21)),
        "csrc/gone.h": "g\n", "csrc/same.h": "s\n"})
    new = _tree(tmp_path / "new", {
        # a line inserted before line 1 and after 10, lines 3 and 5 replaced, 15-16
        # removed and 17 replaced
        "csrc/k.cpp": "top\n" + "".join(
            (f"LINE {i}\n" if i in (3, 5, 17) else f"line {i}\n")
            + ("inserted\n" if i == 10 else "")
            for i in range(1, 21) if i not in (15, 16)),
        "csrc/born.h": "b\n", "csrc/same.h": "s\n"})
    (old / "csrc/blob.bin").write_bytes(b"\x00\x01")
    (new / "csrc/blob.bin").write_bytes(b"\x00\x02")
    (new / "csrc/newblob.bin").write_bytes(b"\x00\x03")
    (old / "csrc/tobin.h").write_text("text\n")
    (new / "csrc/tobin.h").write_bytes(b"\x00bin\n")
    # a removed line that reads like a diff's header once prefixed ("--- x")
    (old / "csrc/q.sql").write_text("select 1;\n-- a comment\nselect 2;\n")
    (new / "csrc/q.sql").write_text("select 1;\nselect 2;\n")
    return old, new


EXPECTED = {"csrc/k.cpp": ((1, 1), (3, 3), (5, 5), (10, 11), (15, 17)), "csrc/gone.h": None,
            "csrc/born.h": None, "csrc/blob.bin": None, "csrc/newblob.bin": None,
            "csrc/tobin.h": None, "csrc/q.sql": ((2, 2),)}
ADDED = {"csrc/born.h", "csrc/newblob.bin"}


def test_the_producers_of_a_diff_read_alike(tmp_path: Path) -> None:
    old, new = _two_sides(tmp_path)
    assert compare_trees(old, new) == (EXPECTED, ADDED)
    # diff -ruN: timestamps after a tab, a new file as a diff from an empty one
    plain = subprocess.run(["diff", "-ruN", "old", "new"], cwd=tmp_path, capture_output=True,
                           text=True, check=False).stdout
    assert "\t" in plain
    changed, _ = parse_diff(plain, old)
    assert changed["csrc/k.cpp"] == EXPECTED["csrc/k.cpp"]
    assert changed["csrc/gone.h"] == ((1, 1),) and "csrc/born.h" in changed
    # git diff, with no context (-U0: an insertion is a hunk of count 0) and with it
    for context in ("-U0", "-U3"):
        diff = subprocess.run(["git", "diff", "--no-index", context, "old", "new"],
                              cwd=tmp_path, capture_output=True, text=True, check=False).stdout
        diff = diff.replace(" a/old/", " a/").replace(" b/new/", " b/").replace(
            "--- a/old/", "--- a/").replace("+++ b/new/", "+++ b/")
        assert parse_diff(diff, old) == (EXPECTED, ADDED), context
    # a diff cut after a file's "---" line: what came before it, no more
    cut = plain[:plain.index("--- old/csrc/k.cpp")] + "--- old/csrc/k.cpp"
    assert "csrc/k.cpp" not in parse_diff(cut, old)[0]


def test_metadata_from_pkg_info_else_the_package_s_version_file(tmp_path: Path) -> None:
    from harness.select.engine_change import metadata

    tree = _tree(tmp_path / "t", {"eng/version.py": "__version__ = '2.1.0'\n"})
    assert metadata(tree) == ("eng", "2.1.0")
    (tree / "eng/_version.py").write_text('__version__: str = "2.2.0"\n')
    assert metadata(tree) == ("eng", "2.2.0")
    (tree / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: eng-cpu\nVersion: 3.0\n")
    assert metadata(tree) == ("eng-cpu", "3.0")
    assert metadata(_tree(tmp_path / "none", {"x/y.py": ""})) == (None, None)


def test_an_sdist_is_unpacked_once_into_its_top_folder(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import tarfile
    import zipfile

    from harness.select.engine_change import unpack

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    src = _tree(tmp_path / "eng-1.0", {"csrc/cpu/a.cpp": "x\n", "PKG-INFO": "Version: 1.0\n"})
    archive = tmp_path / "eng-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src, arcname="eng-1.0")
    first = unpack(archive)
    assert first.name == "eng-1.0" and (first / "csrc/cpu/a.cpp").read_text() == "x\n"
    assert first.parent.parent == tmp_path / "cache" / "harness" / "engine-src"
    (first / "csrc/cpu/a.cpp").write_text("kept\n")  # unpacked once: not again
    assert (unpack(archive) / "csrc/cpu/a.cpp").read_text() == "kept\n"
    flat = tmp_path / "flat.zip"
    with zipfile.ZipFile(flat, "w") as zipped:
        zipped.writestr("csrc/cpu/a.cpp", "z\n")
        zipped.writestr("PKG-INFO", "Version: 1.0\n")
    top = unpack(flat)  # no single top folder: the unpacked folder itself
    assert (top / "csrc/cpu/a.cpp").read_text() == "z\n" and not list(top.glob("*.part*"))
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not a tar")
    with pytest.raises(UsageError, match=r"broken\.tar\.gz: not a readable source archive"):
        unpack(broken)
    assert unpack(src) == src  # a folder is used as it is


def test_a_lane_s_build_release_and_words(tmp_path: Path, engine: Path) -> None:
    from harness.select import by_ops

    none = tmp_path / "no-history.sqlite"
    cpu = by_ops.engine_lane("eng-cpu", "cpu", frozenset({"eng"}), "eng", none)
    gpu = by_ops.engine_lane("eng-rocm", "rocm", frozenset({"fp32"}), "eng", none)
    assert (cpu.family, cpu.runs_engine, cpu.runs, cpu.release) == ("cpu", True, 0, None)
    assert (gpu.family, gpu.runs_engine) == ("gpu", False)
    assert by_ops._pinned(["numpy", "eng-cpu==0.32.0", "eng==9"], "eng") == "0.32.0"
    assert by_ops._pinned(["engine==1.0", "torch==2"], "eng") is None
    assert by_ops._older("0.32.0", "0.34.0") and not by_ops._older("0.34.0", "0.34.0")
    assert by_ops._older("nightly-a", "nightly-b") and not by_ops._older("nightly", "nightly")
    assert by_ops._few(["a", "b", "c", "d"]) == "a, b, c, d"
    assert by_ops._few(["a", "b", "c", "d", "e", "f"]) == "a, b, c, d and 2 more"
    part = derive_engine(_change(engine, {"CMakeLists.txt": None}), read_native(engine),
                         [_lane(runs_engine=False)])
    assert not part.full and part.notes == [("CMakeLists.txt", "no rule knows what it changes "
                                             "(a build file, a file of unknown role); no lane "
                                             "runs the engine")]
