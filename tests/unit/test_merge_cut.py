"""merged.xml from suite files that do not parse (bad input, made by hand: a run that cuts
its own file is tests/integration/test_junit_schema.py): every case read whole before the
damage, an error case naming it, valid XML with true counts, the good files as written."""

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
