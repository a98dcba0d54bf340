"""merged.xml from suite files that do not parse (bad input, made by hand: a run that cuts
its own file is tests/integration/test_junit_schema.py): every case read whole before the
damage, an error case naming it, valid XML with true counts, the good files as written;
and the edges of a file that parses: with or without its XML declaration and
``<testsuites>`` wrapper, an empty wrapper, a wrapper with attributes, a character
reference at its very end."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.results.merge import merge_junit

GOOD = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="2">'
        '<testcase classname="a" name="t1" time="0.5"/><testcase classname="a" name="t2">'
        '<failure message="x">boom</failure></testcase></testsuite></testsuites>')
CUT_IN_A_CASE = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" '
                 'tests="3"><testcase classname="b" name="t1"/><testcase classname="b" '
                 'name="t2"><skipped message="s"/></testcase><testcase classname="b" na')


def merged(tmp_path: Path, files: dict[str, str]) -> ET.Element:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    out = tmp_path / "merged.xml"
    merge_junit([tmp_path / name for name in files], out)
    return ET.parse(out).getroot()


def test_a_file_cut_in_a_case_gives_the_cases_before_it_and_names_the_damage(
        tmp_path: Path) -> None:
    root = merged(tmp_path, {"a.xml": GOOD, "b.xml": CUT_IN_A_CASE})
    good, cut = root.findall("testsuite")
    assert [c.get("name") for c in good] == ["t1", "t2"]
    assert [c.get("name") for c in cut] == ["t1", "t2", "b.xml: cut mid-write"]
    assert cut.get("name") == "pytest"
    assert (cut.get("tests"), cut.get("errors"), cut.get("skipped")) == ("3", "1", "1")
    message = cut[-1][0].get("message", "")
    assert cut[-1][0].tag == "error" and "b.xml does not parse" in message
    assert "2 case(s) read before the damage" in message
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("5", "1", "1")


@pytest.mark.parametrize("text", ["", '<?xml vers', "<testsuites><testsuite name='x'",
                                  GOOD[:-len("</testsuites>") + 4]])
def test_whatever_a_file_holds_merged_xml_parses(tmp_path: Path, text: str) -> None:
    root = merged(tmp_path, {"a.xml": GOOD, "c-shard-1-of-2.xml": text})
    names = [c.get("name") for c in root.iter("testcase")]
    assert names[-1] == "c-shard-1-of-2.xml: cut mid-write"
    assert root.get("tests") == str(len(names))


DECL = '<?xml version="1.0" encoding="utf-8"?>'
SUITE = ('<testsuite name="pytest" tests="2" time="0.5"><testcase classname="a" name="t1"/>'
         '<testcase classname="a" name="t2"><failure message="x">boom</failure></testcase>'
         '</testsuite>')


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
