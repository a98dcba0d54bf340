"""pytest's argv read as pytest reads it (harness/importers/pytest_argv.py): with pytest's
own table of options (and the installed plugins'), and with a table of each nargs kind;
each side of each boundary: a value attached or following, an option with no value at the
end of the command, ``--``, negative numbers, short flags run together, unknown options."""

from __future__ import annotations

import pytest

from harness.importers.pytest_argv import Arg, option_like, option_table, read_argv

TABLE = {"-v": 0, "-s": 0, "-x": 0, "-k": None, "-m": None, "--deselect": None,
         "--opt": "?", "--many": "*", "--two": 2, "--plus": "+"}


def shape(args: list[Arg]) -> list[tuple[object, ...]]:
    return [(a.words, a.option, a.value, a.known, a.missing) for a in args]


def test_pytests_own_table_has_its_options_and_the_plugins() -> None:
    table = option_table()
    assert table["-k"] is None and table["--deselect"] is None and table["-v"] == 0
    assert "--timeout" in table and "-n" in table  # pytest-timeout's, xdist's
    words = ["tests/a.py", "-v", "--deselect", "tests/a.py::t", "-k", "not slow", "-p",
             "no:x", "--timeout", "60", "tests/b.py"]
    args = read_argv(words, table)
    assert [a.words for a in args if not a.option] == [("tests/a.py",), ("tests/b.py",)]
    assert [(a.option, a.value) for a in args if a.option] == [
        ("-v", None), ("--deselect", "tests/a.py::t"), ("-k", "not slow"), ("-p", "no:x"),
        ("--timeout", "60")]


@pytest.mark.parametrize(("words", "expected"), [
    # a value following, attached with =, attached to a short option
    (["-k", "x"], [(("-k", "x"), "-k", "x", True, False)]),
    (["--deselect=a::b"], [(("--deselect=a::b",), "--deselect", "a::b", True, False)]),
    (["-kx"], [(("-kx",), "-k", "x", True, False)]),
    # an option that takes a value, with none: at the end of the command
    (["t.py", "-k"], [(("t.py",), "", None, True, False), (("-k",), "-k", None, True, True)]),
    (["t.py", "--two"], [(("t.py",), "", None, True, False),
                         (("--two",), "--two", None, True, True)]),
    # -- : the rest are targets, whatever they look like
    (["--", "-v", "t.py"], [(("-v",), "", None, True, False),
                            (("t.py",), "", None, True, False)]),
    # a negative number and a lone dash are words, not options
    (["-1", "-", "-.5"], [(("-1",), "", None, True, False), (("-",), "", None, True, False),
                          (("-.5",), "", None, True, False)]),
    # short flags run together, then one that takes the rest of the word or the next word
    (["-vs"], [(("-vs",), "-v", None, True, False)]),
    (["-vsk", "expr"], [(("-vs",), "-v", None, True, False),
                        (("-k", "expr"), "-k", "expr", True, False)]),
    (["-vkexpr"], [(("-v",), "-v", None, True, False), (("-kexpr",), "-k", "expr", True, False)]),
    (["-vq"], [(("-vq",), "-vq", None, False, False)]),  # an unknown flag in the run
    # nargs "?": a value if one follows; "*" and "+": every word to the next option; 2: two
    (["--opt", "v", "-x"], [(("--opt", "v"), "--opt", "v", True, False),
                            (("-x",), "-x", None, True, False)]),
    (["--opt", "-x"], [(("--opt",), "--opt", None, True, False),
                       (("-x",), "-x", None, True, False)]),
    (["--opt"], [(("--opt",), "--opt", None, True, False)]),
    (["--many", "a", "b", "-x"], [(("--many", "a", "b"), "--many", "b", True, False),
                                  (("-x",), "-x", None, True, False)]),
    (["--many"], [(("--many",), "--many", None, True, True)]),
    (["--plus", "a"], [(("--plus", "a"), "--plus", "a", True, False)]),
    (["--two", "a", "b", "c"], [(("--two", "a", "b"), "--two", "b", True, False),
                                (("c",), "", None, True, False)]),
    (["--two", "a"], [(("--two", "a"), "--two", "a", True, False)]),
    # unknown: a flag of its own name, said unknown; with a space, a target
    (["--nope=3", "t.py"], [(("--nope=3",), "--nope", None, False, False),
                            (("t.py",), "", None, True, False)]),
    (["--a b"], [(("--a b",), "", None, True, False)]),
])
def test_each_kind_of_word(words: list[str], expected: list[tuple[object, ...]]) -> None:
    assert shape(read_argv(words, TABLE)) == expected


def test_what_is_option_like() -> None:
    assert option_like("-v") and option_like("--x") and option_like("-1a")
    assert not option_like("-") and not option_like("-3") and not option_like("-0.5")
    assert not option_like("x-y") and not option_like("")
