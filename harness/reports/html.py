"""The report as one self-contained HTML page (templates/report.html.j2, autoescaped)."""

from __future__ import annotations

from collections import Counter

from markupsafe import Markup

from harness.reports import charts
from harness.reports.ids import leaf, shorten
from harness.reports.model import GRID_ROWS, MISSING, NEVER_RAN, Report, Series, SuiteCell, TestRow
from harness.reports.templating import asset, html_env

TOP = 5  # items per box in the change list; the rest behind "and N more"
# Grid cell states in the order of the filter chips: problems first.
CELL_ORDER = ("failed", "error", "xpass", "missing", "skipped", "xfail", "passed", NEVER_RAN)
CELL_LABELS = {
    "failed": "failed",
    "error": "error",
    "xpass": "xpass",
    "xfail": "xfail",
    "skipped": "skipped",
    "passed": "passed",
    MISSING: "missing",
    NEVER_RAN: "—",
}
CHIP_LABELS = {**CELL_LABELS, NEVER_RAN: "never ran"}
SUITE_LABELS = {
    "infra": "infra failure",
    "mostly-skipped": "mostly skipped",
    "all-skipped": "all skipped",
    "empty": "no tests",
    "absent": "declared, did not run",
    "not-applicable": "not applicable",
}


class View:
    """Formatting helpers the template calls; no decisions about the data."""

    def __init__(self, report: Report, shown: list[TestRow]) -> None:
        self.report = report
        self._cells = {(c.lane, c.suite): c for c in report.suite_grid}
        names = {row.key for row in report.test_grid}
        names.update(c.key for c in report.regressions + report.fixes + report.streaks)
        names.update(k.pattern for k in report.known_failures)
        self._short = shorten(names)
        counts: Counter[str] = Counter()
        for row in shown:
            counts.update(set(row.cells.values()))
        self.state_counts = [(s, counts[s]) for s in CELL_ORDER if counts[s]]
        self.missing_lanes = [lane.name for lane in report.lanes if not lane.runs]
        self.new_infra = [e for e in report.tonight.new_infra if e.scope != "case"]
        self.compared = any(lane.runs >= 2 for lane in report.lanes)
        self.no_changes = report.tonight.empty and not report.known_passing

    def short(self, key: str) -> str:
        return self._short.get(key, key)

    @staticmethod
    def leaf(key: str) -> str:
        return leaf(key)

    def suite_cell(self, lane: str, suite: str) -> SuiteCell:
        return self._cells[(lane, suite)]

    @staticmethod
    def suite_label(state: str) -> str:
        return SUITE_LABELS.get(state, state)

    @staticmethod
    def cell_label(state: str) -> str:
        return CELL_LABELS.get(state, state)

    @staticmethod
    def chip_label(state: str) -> str:
        return CHIP_LABELS.get(state, state)

    @staticmethod
    def row_states(row: TestRow) -> str:
        return " ".join(sorted(set(row.cells.values())))

    @staticmethod
    def num(value: float | None) -> str:
        return "" if value is None else f"{value:.3g}"

    @staticmethod
    def speed_trend(name: str, lane: str, values: list[float]) -> Markup:
        points = [(f"night {i + 1}", v) for i, v in enumerate(values)]
        return Markup(charts.sparkline(points, title=f"{name} {lane}", width=60, height=16))

    @staticmethod
    def sparkline(series: Series, limit: float | None) -> Markup:
        return Markup(
            charts.sparkline(series.points, title=f"{series.label} {series.lane}", limit=limit)
        )


def render_html(report: Report, *, markdown_name: str = "report.md") -> str:
    shown = report.test_grid[:GRID_ROWS]
    chart = charts.line_chart(
        [(s.lane, s.points) for s in report.pass_rates],
        title="Pass rate per night: passed / (passed + failed) of each platform's run",
        y_label="pass rate (%)",
        x_label="night (run start, UTC)",
        y_min=0.0,
        y_max=1.0,
    )
    return (
        html_env()
        .get_template("report.html.j2")
        .render(
            r=report,
            t=report.tonight,
            view=View(report, shown),
            shown=shown,
            top=TOP,
            markdown_name=markdown_name,
            pass_rate_chart=Markup(chart),
            css=Markup(asset("report.css")),
            js=Markup(asset("report.js")),
        )
    )
