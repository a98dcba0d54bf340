"""Bad inputs found by the hardening pass: one clear line, never a traceback."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import pytest

from harness.commands.report import parse_since
from harness.errors import ConfigError, UsageError
from harness.matrix import load_matrix
from harness.platform.cache import cache_root
from harness.roots import project_root

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize("text", ["1000000d", "99999999999w"])
def test_since_past_year_one_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="reaches before year 1"):
        parse_since(text, NOW)


def test_since_in_range_still_parses() -> None:
    assert parse_since("14d", NOW) == dt.timedelta(days=14)


@pytest.mark.parametrize("root", ["", "  ", "cache/harness", "./here"])
def test_an_empty_or_relative_cache_root_is_refused(root: str) -> None:
    m = load_matrix("cpu", project_root())
    m = dataclasses.replace(m, caches=dataclasses.replace(m.caches, root=root))
    with pytest.raises(ConfigError, match=r"caches\.root: .*expected an absolute path"):
        cache_root(m)


BAD_JUNIT = (
    b'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="s">'
    b'<testcase classname="a.test_x" name="test_neg" time="-3"/>'
    b'<testcase classname="a.test_x" name="test_b\xff\xfead" time="inf"/>'
    b'<testcase classname="a.test_x" name="test_nul&#0;x&#x1b;y" time="nan"/>'
    b'<testcase classname="a.test_x" name="test_ctl\x01z" time="1.5"/>'
    b'<testcase classname="a.test_x" name="test_ok &amp; &#233;" time="2"/>'
    b"</testsuite></testsuites>"
)


@pytest.mark.parametrize("block", [7, 1 << 20])  # references cut by a block boundary too
def test_invalid_characters_are_replaced_and_bad_times_clamped_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    from harness.results import junit_read

    monkeypatch.setattr(junit_read, "_BLOCK", block)
    path = tmp_path / "bad.xml"
    path.write_bytes(BAD_JUNIT)
    warnings: list[str] = []
    cases, _ = junit_read.read_junit(path, warnings.append)
    assert [(c.nodeid, c.duration) for c in cases] == [
        ("a/test_x.py::test_neg", 0.0),
        ("a/test_x.py::test_b\ufffd\ufffdad", 0.0),
        ("a/test_x.py::test_nul\ufffdx\ufffdy", 0.0),
        ("a/test_x.py::test_ctl\ufffdz", 1.5),
        ("a/test_x.py::test_ok & \u00e9", 2.0),
    ]
    assert warnings == [
        f"{path}: 5 character(s) that are not valid XML or UTF-8 replaced with U+FFFD",
        f"{path}: 3 test case time(s) negative or not finite; stored as 0",
    ]


def test_secret_values_are_masked_raw_xml_and_json_escaped(tmp_path: Path) -> None:
    from harness.process import secret_names as sn

    token = 'hf_a&b"c<d>e\\f'
    sn.register_secrets({"HF_TOKEN": token, "PLAIN": "not-a-secret-value", "MY_KEY": "true"})
    try:
        assert sn.scrub(f"x {token} y") == "x *** y"
        assert sn.scrub("true and not-a-secret-value stay") == "true and not-a-secret-value stay"
        junit = tmp_path / "j.xml"
        junit.write_text('<e message="hf_a&amp;b&quot;c&lt;d&gt;e\\f"/>')
        partial = tmp_path / "p.jsonl"
        partial.write_text(json.dumps({"message": token}) + "\n")
        for path in (junit, partial):
            sn.scrub_file(path)
        assert junit.read_text() == '<e message="***"/>'
        assert json.loads(partial.read_text()) == {"message": "***"}
    finally:
        sn.register_secrets({})
