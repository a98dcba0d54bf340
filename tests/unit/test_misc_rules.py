"""The rules at the edges of pytest's argv (harness/importers/pytest_argv.py) and the SQL
form of an outcome list (harness/results/case_meaning.py), each side of each boundary: an
option whose values stop at an odd count, ``nargs="?"`` with two words after it, an
unknown short option with a value or a space; every outcome at once (merged.xml's edges are
tests/unit/test_merge_cut.py's)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, cast

import pytest

from harness.importers.pytest_argv import Arg, _argparser, read_argv
from harness.results.case_meaning import sql
from harness.results.outcome import STATUSES

if TYPE_CHECKING:
    from _pytest.config.argparsing import Parser

# --- pytest's argv -------------------------------------------------------------------

TABLE = {"-v": 0, "-x": 0, "-k": None, "--opt": "?", "--many": "*", "--plus": "+"}


def shape(args: list[Arg]) -> list[tuple[object, ...]]:
    return [(a.words, a.option, a.value, a.known, a.missing) for a in args]


@pytest.mark.parametrize(("words", "expected"), [
    # "*" and "+": the values stop at the next option, after one word or three
    (["--many", "a", "-x"], [(("--many", "a"), "--many", "a", True, False),
                             (("-x",), "-x", None, True, False)]),
    (["--plus", "a", "-x"], [(("--plus", "a"), "--plus", "a", True, False),
                             (("-x",), "-x", None, True, False)]),
    (["--many", "a", "b", "c", "-x"], [(("--many", "a", "b", "c"), "--many", "c", True, False),
                                       (("-x",), "-x", None, True, False)]),
    # "?": one word at most, the next is a target
    (["--opt", "v", "w"], [(("--opt", "v"), "--opt", "v", True, False),
                           (("w",), "", None, True, False)]),
    (["--opt", "v", "w", "z"], [(("--opt", "v"), "--opt", "v", True, False),
                                (("w",), "", None, True, False), (("z",), "", None, True, False)]),
    # an unknown short option: named without its =value; with a space, a target
    (["-z=1"], [(("-z=1",), "-z", None, False, False)]),
    (["-z y"], [(("-z y",), "", None, True, False)]),
    (["-z"], [(("-z",), "-z", None, False, False)]),
])
def test_where_an_options_values_stop_and_what_an_unknown_short_option_is(
        words: list[str], expected: list[tuple[object, ...]]) -> None:
    assert shape(read_argv(words, TABLE)) == expected


class _Pytest8Parser:
    """pytest 8's ``Parser`` as far as the harness reads it: it builds its argparse parser
    on demand, and has no ``optparser``."""

    def __init__(self) -> None:
        self.built = argparse.ArgumentParser()

    def _getparser(self) -> argparse.ArgumentParser:
        return self.built


def test_a_pytest_8_parser_gives_the_parser_it_builds_and_one_with_neither_is_refused() -> None:
    old = _Pytest8Parser()
    assert _argparser(cast("Parser", old)) is old.built
    with pytest.raises(AttributeError, match="'Parser' object has no attribute '_getparser'"):
        _argparser(cast("Parser", object()))


# --- the SQL form of an outcome list -------------------------------------------------


def test_sql_takes_every_outcome_at_once() -> None:
    assert sql(STATUSES) == "(" + ", ".join(f"'{s}'" for s in STATUSES) + ")"
    assert sql(set(STATUSES)) == sql(STATUSES)
    with pytest.raises(ValueError, match="not outcomes: \\['nope'\\]"):
        sql([*STATUSES, "nope"])
