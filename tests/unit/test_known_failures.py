"""The one known-failure matcher (harness.matrix.known_failures): an entry covers the ids
it names and no other. A pattern that matched a prefix of an id (no end anchor) would
cover every test whose id starts with it, and silence failures nobody declared."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from harness.matrix import load_matrix
from harness.matrix.known_failures import (
    Entry,
    entries_for,
    entries_from_matrix,
    glob_to_regex,
    match,
)
from harness.matrix.model import HostCondition, Matrix

FILE = "suites/kernel_parity/test_parity.py"


def entry(pattern: str, **kw: object) -> Entry:
    fields: dict[str, object] = {"action": "xfail", "reason": "r", "where": "m.yaml:3",
                                 "expires": None, **kw}
    return Entry(pattern=pattern, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("other", [
    f"{FILE}::test_x_slow",  # the same name with more after it
    f"{FILE}::test_xy",
    f"{FILE}::test_x[bfloat16]",  # a parametrised id of the named test
    f"{FILE}::test_x::inner",
    f"other/{FILE}::test_x",  # the same path under another folder
    f"{FILE}x::test_x",
])
def test_an_id_covers_only_itself(other: str) -> None:
    named = entry(f"{FILE}::test_x")
    assert named.covers(f"{FILE}::test_x")
    assert not named.covers(other)


def test_a_parametrised_id_covers_only_its_parameters() -> None:
    named = entry(f"{FILE}::test_x[rms_norm-2d-bfloat16]")
    assert named.covers(f"{FILE}::test_x[rms_norm-2d-bfloat16]")
    for other in ("test_x[rms_norm-2d-bfloat16-more]", "test_x[rms_norm-2d-bfloat16]x",
                  "test_x[rms_norm-2d]", "test_x[xrms_norm-2d-bfloat16]"):
        assert not named.covers(f"{FILE}::{other}"), other


def test_globs_star_and_question_mark_brackets_literal() -> None:
    star = entry(f"{FILE}::test_x[*-cpu]")
    assert star.covers(f"{FILE}::test_x[a-cpu]") and star.covers(f"{FILE}::test_x[a-b-cpu]")
    assert star.covers(f"{FILE}::test_x[-cpu]")
    assert not star.covers(f"{FILE}::test_x[a-cpu-2]")
    assert not star.covers(f"{FILE}::test_xy[a-cpu]")
    one = entry("t.py::test_?")
    assert one.covers("t.py::test_a") and not one.covers("t.py::test_ab")
    assert not one.covers("t.py::test_")
    literal = entry("t.py::test_x[ab]")  # not a character class
    assert not literal.covers("t.py::test_xa") and literal.covers("t.py::test_x[ab]")
    dots = entry("t.py::test.x")  # a dot is a dot
    assert not dots.covers("t.py::testyx")
    assert glob_to_regex("a*b").match("a\nb")  # ids with newlines in parameters


def test_ids_are_compared_normalised() -> None:
    named = entry("t.py::test_x[cuda-bfloat16]")
    assert named.covers("t.py::test_x[cuda:0-torch.bfloat16]")
    assert named.covers("t.py::test_x[cuda-bf16]")
    assert not named.covers("t.py::test_x[cuda-float16]")


def test_match_returns_the_first_covering_entry_and_records_the_id() -> None:
    first, second = entry("t.py::test_a*"), entry("t.py::test_*")
    assert match([first, second], "t.py::test_b") is second
    assert match([first, second], "t.py::test_a1") is first
    assert match([first, second], "u.py::test_a") is None
    assert first.matched == ["t.py::test_a1"] and second.matched == ["t.py::test_b"]


def test_entry_fields() -> None:
    today = dt.date.today()
    assert entry("x", expires=today - dt.timedelta(days=1)).expired
    assert not entry("x", expires=today).expired and not entry("x").expired
    assert entry(f"{FILE}::test_x[a::b]").file_part == FILE
    assert entry("t.py::x", issue="#5").describe() == "r (#5) [m.yaml:3]"
    host = HostCondition(cpu_flags=("amx_int8",), cpu_flags_absent=("avx2",))
    assert entry("t.py::x", host=host).describe() == (
        "r (on a host CPU with amx_int8 and without avx2) [m.yaml:3]")


MATRIX = """\
extends: {base}
name: kf-{name}
fp8: {{e4m3: float8_e4m3fnuz, e5m2: float8_e5m2fnuz}}
known_failures:
  - id: "t.py::test_a[{{device}}-{{fp8}}]"
    reason: plain
    issue: "#1"
    owner: me
    action: quarantine
    expires: 2999-01-01
    expect: {{raises: ParityError}}
  - id: "t.py::test_b"
    reason: needs fp8
    requires: [fp8]
  - id: "t.py::test_c"
    reason: amx only
    host: {{cpu_flags: [amx_int8]}}
"""


def _matrix(tmp_path: Path, base: str = "rocm") -> Matrix:
    from harness.roots import project_root

    path = tmp_path / f"kf-{base}.yaml"
    path.write_text(MATRIX.format(base=project_root() / "matrices" / f"{base}.yaml", name=base))
    return load_matrix(path)


def test_entries_fill_device_and_fp8_and_keep_what_the_matrix_says(tmp_path: Path) -> None:
    matrix = _matrix(tmp_path)
    entries = entries_for(matrix, emulate=True, host_flags=frozenset({"amx_int8"}))
    mine = {e.raw: e for e in entries if e.raw.startswith("t.py")}
    a = mine["t.py::test_a[{device}-{fp8}]"]
    assert a.pattern == "t.py::test_a[cpu-float8_e4m3fnuz]"  # emulated: the kernels ran on cpu
    assert (a.action, a.reason, a.issue, a.owner) == ("quarantine", "plain", "#1", "me")
    assert a.expires == dt.date(2999, 1, 1) and a.expect == {"raises": "ParityError"}
    assert a.where.endswith("kf-rocm.yaml:5")
    assert set(mine) == {"t.py::test_a[{device}-{fp8}]", "t.py::test_b", "t.py::test_c"}
    hardware = entries_for(matrix, emulate=False, host_flags=frozenset())
    names = {e.raw: e for e in hardware if e.raw.startswith("t.py")}
    assert names["t.py::test_a[{device}-{fp8}]"].pattern.startswith("t.py::test_a[cuda-")
    assert "t.py::test_c" not in names  # the host lacks amx_int8
    anyhost = entries_for(matrix, emulate=False, host_flags=None)
    assert "t.py::test_c" in {e.raw for e in anyhost}


def test_requires_drops_an_entry_where_the_capability_is_missing(tmp_path: Path) -> None:
    matrix = _matrix(tmp_path)
    kept = entries_from_matrix(matrix, device="cpu", fp8=None, has=lambda cap: False,
                               host_flags=None)
    raws = {e.raw for e in kept}
    assert "t.py::test_b" not in raws and "t.py::test_c" in raws
    assert {e.pattern for e in kept if e.raw.startswith("t.py::test_a")} == {
        "t.py::test_a[cpu-nofp8]"}
