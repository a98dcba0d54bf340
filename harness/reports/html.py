"""The report as one self-contained HTML file: inline CSS, inline SVG, a little inline JS."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from harness.reports import charts
from harness.reports.model import Report, SuiteCell

MAX_TEST_ROWS = 2000
_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ddd;padding:2px 6px;
text-align:left;vertical-align:top}th{background:#f3f3f3}
.passed{background:#d8f0d8}.failed,.error{background:#f6c6c6}.xpass{background:#fbe3a6}
.xfail{background:#e4e4f7}.skipped{background:#eee}.never-ran{background:#fff;color:#999;
font-style:italic}.missing{background:#fde9c8}.infra{background:#e8c6f0}
.all-skipped,.empty,.absent{background:#fde9c8;font-weight:bold}
.flag::before{content:"\\26A0 ";color:#b35900}.muted{color:#777}
.headline{font-size:15px;padding:.5em;background:#f6f6f6;border-left:4px solid #555}
td.num{text-align:right}.chart{max-width:100%;height:auto}
"""
_JS = """
(function(){
  var box=document.getElementById('test-filter');
  var bad=document.getElementById('test-bad-only');
  var rows=document.querySelectorAll('#test-grid tbody tr');
  function apply(){
    var q=box.value.toLowerCase();
    rows.forEach(function(r){
      var show=r.dataset.test.toLowerCase().indexOf(q)>=0;
      if(bad.checked&&r.dataset.green==='1'){show=false;}
      r.style.display=show?'':'none';
    });
  }
  box.addEventListener('input',apply);bad.addEventListener('change',apply);
})();
"""


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, ident: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    attr = f' id="{ident}"' if ident else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _empty(text: str) -> str:
    return f'<p class="muted">{escape(text)}</p>'


def _suite_cell(cell: SuiteCell) -> str:
    c = cell.counts
    text = (
        f"{c.get('passed', 0)} / {c.get('failed', 0)} / {c.get('xfail', 0)} / "
        f"{c.get('skipped', 0)} / {c.get('error', 0)}"
    )
    if c.get("xpass"):
        text += f" +{c['xpass']} xpass"
    label = text if cell.state in ("passed", "failed") else f"{cell.state}: {text}"
    flag = " flag" if cell.flagged else ""
    return (
        f'<td class="{cell.state}{flag}" data-lane="{escape(cell.lane)}" '
        f'data-suite="{escape(cell.suite)}" data-state="{cell.state}" '
        f'title="{escape(cell.reason)}">{escape(label)}'
        f'<br><span class="muted">{cell.duration_s:.1f}s</span></td>'
    )


def render_html(report: Report, *, markdown_name: str = "report.md") -> str:
    lanes = [lane.name for lane in report.lanes]
    out: list[str] = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Nightly coverage {escape(report.until[:10])}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Nightly coverage report — {escape(report.since[:10])} to "
        f"{escape(report.until[:10])}</h1>",
        f'<p class="headline" id="headline">{escape(report.headline)}</p>',
        f'<p class="muted">history: {escape(report.database)}; generated {report.generated}; '
        f"summary: {escape(markdown_name)}</p>",
    ]
    for line in report.warnings:
        out.append(f'<p class="flag">{escape(line)}</p>')

    out.append('<h2 id="platforms">Platforms</h2>')
    out.append(
        _table(
            ["platform", "runs in window", "latest run", "started", "status", "infra"],
            (
                [
                    escape(info.name),
                    str(info.runs),
                    escape(info.latest_run or "never ran"),
                    escape(info.latest_started or ""),
                    escape(info.latest_status or ""),
                    escape(info.infra_signature or ""),
                ]
                for info in report.lanes
            ),
        )
    )
    if report.pass_rates:
        out.append(
            charts.line_chart(
                [(s.lane, s.points) for s in report.pass_rates],
                title="pass rate per night",
                y_min=0.0,
                y_max=1.0,
            )
        )

    out.append('<h2 id="suites">Platform × suite (passed / failed / xfail / skipped / error)</h2>')
    by_cell = {(c.lane, c.suite): c for c in report.suite_grid}
    head = "".join(f"<th>{escape(s)}</th>" for s in report.suites)
    body = "".join(
        f"<tr><th>{escape(lane)}</th>"
        + "".join(_suite_cell(by_cell[(lane, s)]) for s in report.suites)
        + "</tr>"
        for lane in lanes
    )
    out.append(
        f'<table id="suite-grid"><thead><tr><th>platform</th>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )

    out.append('<h2 id="tests">Test × platform</h2>')
    shown = report.test_grid[:MAX_TEST_ROWS]
    if len(report.test_grid) > len(shown):
        out.append(
            _empty(
                f"showing the first {len(shown)} of {report.test_rows_total} tests "
                "(problems first); report.json has all of them"
            )
        )
    out.append(
        '<p><input id="test-filter" placeholder="filter tests"> <label>'
        '<input type="checkbox" id="test-bad-only"> only tests not green everywhere'
        "</label></p>"
    )
    rows = []
    for row in shown:
        green = all(s == "passed" for s in row.cells.values())
        cells = "".join(
            f'<td class="{escape(row.cells[lane])}" data-lane="{escape(lane)}" '
            f'data-state="{escape(row.cells[lane])}" title="{escape(row.notes.get(lane, ""))}">'
            f"{escape(row.cells[lane])}</td>"
            for lane in lanes
        )
        rows.append(
            f'<tr data-test="{escape(row.key)}" data-green="{int(green)}">'
            f"<td>{escape(row.key)}</td>{cells}</tr>"
        )
    lane_head = "".join(f"<th>{escape(lane)}</th>" for lane in lanes)
    out.append(
        f'<table id="test-grid"><thead><tr><th>test</th>{lane_head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )

    out.append('<h2 id="capabilities">Capability coverage (tests that ran requiring it)</h2>')
    cap_rows = []
    for cap in report.capabilities:
        cap_cells: list[str] = []
        for lane in lanes:
            if not cap.provided.get(lane):
                cap_cells.append('<span class="muted">—</span>')
            elif cap.tests.get(lane):
                cap_cells.append(str(cap.tests[lane]))
            else:
                cap_cells.append('<span class="flag">0</span>')
        hw = " (hardware)" if cap.hardware else ""
        parent = f" ← {escape(cap.parent)}" if cap.parent else ""
        cap_rows.append([f"{escape(cap.name)}{parent}{hw}", *cap_cells])
    out.append(
        _table(["capability", *lanes], cap_rows, ident="capabilities-grid")
        if cap_rows
        else _empty("no capability catalogue found")
    )
    if report.uncovered:
        out.append(
            "<p>Uncovered (provided, no test ran): "
            + ", ".join(
                f'<span class="flag">{escape(lane)}: {escape(cap)}</span>'
                for lane, cap in report.uncovered
            )
            + "</p>"
        )

    out.append('<h2 id="regressions">Regressions and fixes (against the previous run)</h2>')
    out.append(
        _table(
            ["platform", "test", "before", "after", "message"],
            (
                [
                    escape(c.lane),
                    escape(c.key),
                    escape(c.before),
                    f'<span class="{escape(c.after)}">{escape(c.after)}</span>',
                    escape(c.message[:200]),
                ]
                for c in report.regressions
            ),
            ident="regressions",
        )
        if report.regressions
        else _empty("no regressions")
    )
    out.append(
        _table(
            ["platform", "test", "before", "after"],
            (
                [escape(c.lane), escape(c.key), escape(c.before), escape(c.after)]
                for c in report.fixes
            ),
            ident="fixes",
        )
        if report.fixes
        else _empty("no fixes")
    )

    out.append('<h2 id="streaks">Failure streaks</h2>')
    out.append(
        _table(
            ["platform", "test", "runs failing", "since", "message"],
            (
                [
                    escape(s.lane),
                    escape(s.key),
                    str(s.runs),
                    escape(s.since),
                    escape(s.message[:200]),
                ]
                for s in report.streaks
            ),
            ident="streaks",
        )
        if report.streaks
        else _empty("no test has failed two runs in a row")
    )

    out.append('<h2 id="flaky">Flaky tests (infrastructure failures excluded)</h2>')
    out.append(
        _table(
            ["platform", "test", "runs", "failures", "flips", "passed on rerun"],
            (
                [
                    escape(f.lane),
                    escape(f.key),
                    str(f.runs),
                    str(f.failures),
                    str(f.flips),
                    str(f.rerun_passes),
                ]
                for f in report.flaky
            ),
            ident="flaky",
        )
        if report.flaky
        else _empty("no flaky tests")
    )

    out.append('<h2 id="infra">Infrastructure failures (not counted as flakes)</h2>')
    out.append(
        _table(
            ["started", "platform", "scope", "what", "signature", "message"],
            (
                [
                    escape(e.started),
                    escape(e.lane),
                    e.scope,
                    escape(e.name),
                    f'<span class="infra">{escape(e.signature)}</span>',
                    escape(e.message[:200]),
                ]
                for e in report.infra
            ),
            ident="infra-events",
        )
        if report.infra
        else _empty("no infrastructure failures")
    )

    out.append('<h2 id="headroom">Tolerance headroom (≥ 80% of the tolerance used)</h2>')
    out.append(
        _table(
            ["platform", "test", "op", "dtype", "provider", "headroom", "max abs err", "atol"],
            (
                [
                    escape(h.lane),
                    escape(h.key),
                    escape(h.op),
                    escape(h.dtype),
                    escape(h.provider),
                    f"{h.headroom:.2f}",
                    "" if h.max_abs_err is None else f"{h.max_abs_err:.3g}",
                    "" if h.atol is None else f"{h.atol:.3g}",
                ]
                for h in report.headroom
            ),
            ident="headroom",
        )
        if report.headroom
        else _empty("no test above 80% of its tolerance")
    )
    if report.error_trends:
        out.append("<h3>Worst headroom per op and platform, per night</h3>")
        out.append(
            _table(
                ["op", "platform", "trend (red: tolerance)", "latest"],
                (
                    [
                        escape(s.label),
                        escape(s.lane),
                        charts.sparkline(s.points, title=f"{s.label} {s.lane}", limit=1.0),
                        f"{s.points[-1][1]:.2f}",
                    ]
                    for s in report.error_trends
                ),
                ident="error-trends",
            )
        )

    out.append('<h2 id="fusion">Fusion counts over time</h2>')
    out.append(
        _table(
            ["platform", "test", "pass", "trend", "latest", "expected", "drift"],
            (
                [
                    escape(s.lane),
                    escape(s.key),
                    escape(s.label),
                    charts.sparkline(s.points, title=s.label),
                    f"{s.points[-1][1]:g}",
                    "" if s.expected is None else f"{s.expected:g}",
                    '<span class="flag">drift</span>' if s.drifted else "stable",
                ]
                for s in report.fusion
            ),
            ident="fusion",
        )
        if report.fusion
        else _empty("no fusion counts recorded")
    )

    out.append('<h2 id="known-failures">Known failures to revisit</h2>')
    out.append(
        _table(
            [
                "platform",
                "pattern",
                "state",
                "expires",
                "reason",
                "issue",
                "owner",
                "passing tests",
            ],
            (
                [
                    escape(k.lane),
                    escape(k.pattern),
                    f'<span class="flag">{k.state}</span>',
                    escape(k.expires or ""),
                    escape(k.reason),
                    escape(k.issue),
                    escape(k.owner),
                    escape(", ".join(k.tests)),
                ]
                for k in report.known_failures
            ),
            ident="known-failures",
        )
        if report.known_failures
        else _empty("none passing, expired or expiring")
    )
    out.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(out)
