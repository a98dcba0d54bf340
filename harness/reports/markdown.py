"""report.md: headline, then new failures, infrastructure failures, mostly-skipped suites
and known failures that now pass, each capped with "and N more" and linked into the HTML."""

from __future__ import annotations

from markupsafe import Markup

from harness.reports import mdescape
from harness.reports.model import Report
from harness.reports.templating import markdown_env
from harness.results.case_meaning import NEW_FAILURES

TOP = 5


def render_markdown(report: Report, *, html_url: str = "report.html") -> str:
    """``html_url``: where report.html will be (a relative name, or the CI artifact URL)."""
    tonight = report.tonight

    def link(label: object, anchor: str) -> Markup:
        return mdescape.link(label, f"{html_url}#{anchor}")

    def more(total: int, shown: int, anchor: str) -> Markup:
        if total <= shown:
            return Markup("")
        return Markup(f"- … and {total - shown} more: ") + link("full list", anchor)

    text = (
        markdown_env()
        .get_template("report.md.j2")
        .render(
            r=report,
            t=tonight,
            top=TOP,
            link=link,
            more=more,
            missing_lanes=[lane.name for lane in report.lanes if not lane.runs],
            infra=[e for e in tonight.new_infra if e.scope != "case"],
            skipping=tonight.skipping,
            # With no run to compare against (one run per lane), name what fails instead.
            failing=[]
            if any(lane.runs >= 2 for lane in report.lanes)
            else [
                (lane, row)
                for row in report.test_grid
                for lane, state in row.cells.items()
                if state in NEW_FAILURES
            ],
        )
    )
    # Blank lines in runs of more than one come from skipped template blocks.
    lines: list[str] = []
    for line in text.splitlines():
        if line.strip() or (lines and lines[-1].strip()):
            lines.append(line.rstrip())
    return "\n".join(lines).strip() + "\n"
