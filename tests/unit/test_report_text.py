"""Markdown escaping, shortened test ids and the chart's single-night sentence."""

from __future__ import annotations

import re

from harness.reports import charts, mdescape
from harness.reports.ids import leaf, shorten

HOSTILE = (
    "boom <img src=x onerror=alert(1)> [click](http://evil.invalid) cc @org/team "
    "``two`` *bold* _it_ | pipe\nsecond line"
)


def test_code_span_holds_anything_verbatim_on_one_line() -> None:
    span = str(mdescape.code(HOSTILE, limit=500))
    fence = re.match(r"`+", span)
    assert fence is not None and len(fence.group()) == 3  # longer than the ``two`` run
    assert span.endswith(fence.group()) and "\n" not in span
    assert span[3:-3].strip() == HOSTILE.replace("\n", " ")


def test_code_span_pads_a_leading_backtick() -> None:
    assert str(mdescape.code("`x`")) == "`` `x` ``"


def test_text_makes_markup_links_and_mentions_inert() -> None:
    out = str(mdescape.text(HOSTILE, limit=500))
    assert "<" not in out and "&lt;img" in out
    assert "[click]" not in out and "\\[click\\]" in out
    assert "@org" not in out and "@\u200borg/team" in out
    assert "\\*bold\\*" in out and "\\_it\\_" in out and "\\|" in out
    assert "\n" not in out


def test_text_cuts_long_lines() -> None:
    out = str(mdescape.text("x" * 500, limit=20))
    assert len(out) == 20 and out.endswith("…")


def test_link_keeps_a_code_label_and_escapes_the_rest() -> None:
    assert str(mdescape.link(mdescape.code("a[b]"), "r.html#x")) == "[`a[b]`](r.html#x)"
    assert str(mdescape.link("a [b]", "r (1).html")) == "[a \\[b\\]](r%20%281%29.html)"


def test_shorten_drops_the_shared_folders_and_keeps_rows_apart() -> None:
    keys = [
        "suites/kernel_parity/test_parity.py::test_parity[linear-m1-bfloat16]",
        "suites/kernel_parity/test_norm.py::test_rms[" + "p" * 80 + "]",
        "suites/kernel_parity/test_norm.py::test_rms[" + "p" * 79 + "q]",
        "loose.xml::case",
    ]
    short = shorten(keys)
    assert short[keys[0]] == "test_parity.py::test_parity[linear-m1-bfloat16]"
    assert short[keys[3]] == "loose.xml::case"
    assert len(set(short.values())) == len(keys)
    assert leaf(keys[0]) == "test_parity[linear-m1-bfloat16]"


def test_shorten_cuts_long_parameters_in_the_middle() -> None:
    key = "a/b.py::t[" + "x" * 30 + "-" + "y" * 30 + "]"
    short = shorten([key, "a/c.py::u"])[key]
    assert short.startswith("b.py::t[xxx") and short.endswith("yyy]") and "…" in short


def test_single_night_is_a_sentence_not_an_empty_frame() -> None:
    one = charts.line_chart(
        [("cpu", [("2026-12-01T03:00:00Z", 0.5)]), ("rocm", [("2026-12-01T03:10:00Z", 1.0)])],
        title="pass rate",
        y_label="pass rate (%)",
        x_label="night",
    )
    assert "<svg" not in one
    assert "One night so far (2026-12-01): cpu 50%, rocm 100%" in one


def test_chart_has_axes_units_points_and_a_legend() -> None:
    svg = charts.line_chart(
        [("cpu", [("2026-11-29T03:00:00Z", 0.5), ("2026-12-01T03:00:00Z", 1.0)])],
        title="pass rate",
        y_label="pass rate (%)",
        x_label="night (UTC)",
        y_min=0.0,
        y_max=1.0,
    )
    assert svg.count("<circle") == 3  # two points and the legend's swatch
    for text in ("pass rate (%)", "night (UTC)", ">0%<", ">100%<", ">11-29<", ">12-01<", ">cpu<"):
        assert text in svg, text
