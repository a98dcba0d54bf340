"""The rules at the edges of merged.xml (harness/results/merge.py), pytest's argv
(harness/importers/pytest_argv.py) and the SQL form of an outcome list
(harness/results/case_meaning.py), each side of each boundary: a file with or without its
XML declaration and ``<testsuites>`` wrapper, an empty wrapper, a wrapper with attributes,
a reference at a file's very end, a file cut inside a case or with two suites; an option
whose values stop at an odd count, ``nargs="?"`` with two words after it, an unknown short
option with a value or a space; every outcome at once."""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from harness.importers.pytest_argv import Arg, _argparser, read_argv
from harness.results.case_meaning import sql
from harness.results.merge import merge_junit
from harness.results.outcome import STATUSES

if TYPE_CHECKING:
    from _pytest.config.argparsing import Parser

DECL = '<?xml version="1.0" encoding="utf-8"?>'
SUITE = ('<testsuite name="pytest" tests="2" time="0.5"><testcase classname="a" name="t1"/>'
         '<testcase classname="a" name="t2"><failure message="x">boom</failure></testcase>'
         '</testsuite>')


def merged(tmp_path: Path, files: dict[str, str]) -> ET.Element:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    out = tmp_path / "merged.xml"
    merge_junit([tmp_path / name for name in files], out)
    return ET.parse(out).getroot()


def cases(suite: ET.Element) -> list[str | None]:
    return [c.get("name") for c in suite.iter("testcase")]


# --- merged.xml: a file's prologue and wrapper ---------------------------------------


@pytest.mark.parametrize("text", [
    DECL + "<testsuites>" + SUITE + "</testsuites>",  # both
    "<testsuites>" + SUITE + "</testsuites>",  # the wrapper, no declaration
    DECL + SUITE,  # the declaration, no wrapper
    SUITE,  # neither
    DECL + '<testsuites name="pytest tests" time="9" tests="7">' + SUITE + "</testsuites>",
    DECL + "\n  <testsuites>\n  " + SUITE + "\n  </testsuites>\n  ",  # whitespace around
    "\n  <testsuites>\n" + SUITE + "\n</testsuites>\n",  # and before, with no declaration
])
def test_each_files_suite_is_copied_whatever_prologue_and_wrapper_it_has(
        tmp_path: Path, text: str) -> None:
    root = merged(tmp_path, {"a.xml": text})
    assert root.tag == "testsuites" and root.get("name") == "harness"
    assert [s.tag for s in root] == ["testsuite"]  # no wrapper inside, nothing cut off
    (suite,) = root
    assert suite.get("name") == "pytest" and cases(suite) == ["t1", "t2"]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "1", "0")
    assert root.get("time") == "0.500"


@pytest.mark.parametrize("empty", ["<testsuites/>", DECL + '\n<testsuites name="x" />\n',
                                   "  <testsuites  tests='0'/>  "])
def test_an_empty_testsuites_adds_no_suite(tmp_path: Path, empty: str) -> None:
    root = merged(tmp_path, {"a.xml": SUITE, "b.xml": empty})
    assert [s.get("name") for s in root] == ["pytest"]
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "1", "0")


def test_the_suites_come_in_file_order_and_the_roots_time_is_their_sum(tmp_path: Path) -> None:
    second = SUITE.replace('name="pytest"', 'name="second"').replace('"0.5"', '"1.2505"')
    root = merged(tmp_path, {"b.xml": DECL + second, "a.xml": "<testsuites>" + SUITE
                             + "</testsuites>"})
    assert [s.get("name") for s in root] == ["pytest", "second"]
    assert root.get("tests") == "4" and root.get("failures") == "2"
    assert root.get("time") == "1.750"


def test_a_file_that_ends_in_a_character_reference_is_read_to_its_end(tmp_path: Path) -> None:
    last = DECL + '<testsuite tests="0" name="R&amp;D"/>'  # the '&' in the last 16 bytes
    root = merged(tmp_path, {"a.xml": SUITE, "b.xml": last})
    assert [s.get("name") for s in root] == ["pytest", "R&D"]
    assert cases(root) == ["t1", "t2"]  # no case says the file was cut


# --- merged.xml: a file cut mid-write ------------------------------------------------


def test_a_case_cut_after_its_start_tag_is_not_read_whole(tmp_path: Path) -> None:
    cut = ('<testsuite name="s"><testcase classname="b" name="t1"/>'
           '<testcase classname="b" name="t2"><failure message="x">bo')
    (suite,) = merged(tmp_path, {"b.xml": cut})
    assert cases(suite) == ["t1", "b.xml: cut mid-write"]
    assert "1 case(s) read before the damage" in suite[-1][0].get("message", "")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "0", "1")


def test_a_cut_file_keeps_its_first_suites_attributes_not_the_wrappers_or_the_last(
        tmp_path: Path) -> None:
    cut = ('<testsuites name="all" time="3"><testsuite name="first" hostname="h">'
           '<testcase classname="b" name="t1"/></testsuite><testsuite name="second">'
           '<testcase classname="b" name="t2"/><testcase classname="b" na')
    (suite,) = merged(tmp_path, {"b.xml": cut})
    assert suite.get("name") == "first" and suite.get("hostname") == "h"
    assert cases(suite) == ["t1", "t2", "b.xml: cut mid-write"]


def test_a_cut_file_whose_suite_has_no_attributes_is_named_after_the_file(
        tmp_path: Path) -> None:
    cut = ('<testsuites name="all"><testsuite><testcase classname="b" name="t1"/>'
           '<testcase classname="b" name="t2"/><testcase')
    (suite,) = merged(tmp_path, {"c.xml": cut})
    assert suite.get("name") == "c"
    assert cases(suite) == ["t1", "t2", "c.xml: cut mid-write"]


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
