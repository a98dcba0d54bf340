"""A short Markdown summary for a PR comment or a chat post: headline, worst items, link."""

from __future__ import annotations

from harness.reports.model import Report

TOP = 10


def _line(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:160]


def render_markdown(report: Report, *, html_path: str) -> str:
    out = [
        f"## Nightly coverage {report.until[:10]}",
        "",
        f"**{report.headline}**",
        "",
        f"Full report: [{html_path}]({html_path})",
    ]

    def section(title: str, items: list[str], total: int) -> None:
        if not items:
            return
        more = f" (top {len(items)} of {total})" if total > len(items) else ""
        out.extend(["", f"### {title}{more}", "", *items])

    section(
        "Regressions",
        [
            f"- `{_line(c.key)}` on **{c.lane}**: {c.before} → {c.after} — {_line(c.message)}"
            for c in report.regressions[:TOP]
        ],
        len(report.regressions),
    )
    idle = [lane.name for lane in report.lanes if not lane.runs]
    if idle:
        out.extend(["", f"**No run in the window:** {', '.join(idle)}"])
    ran = {lane.name for lane in report.lanes if lane.runs}
    gaps = [c for c in report.suite_grid if c.flagged and c.state != "failed" and c.lane in ran]
    section(
        "Gaps (not green)",
        [
            f"- **{c.lane}** / `{c.suite}`: {c.state}"
            + (f" ({_line(c.reason)})" if c.reason else "")
            for c in gaps[:TOP]
        ],
        len(gaps),
    )
    section(
        "Failure streaks",
        [
            f"- `{_line(s.key)}` on **{s.lane}**: {s.runs} runs since {s.since[:10]}"
            for s in report.streaks[:TOP]
        ],
        len(report.streaks),
    )
    section(
        "Flaky",
        [
            f"- `{_line(f.key)}` on **{f.lane}**: {f.flips} flips, "
            f"{f.rerun_passes} passes on rerun in {f.runs} runs"
            for f in report.flaky[:TOP]
        ],
        len(report.flaky),
    )
    runs = [e for e in report.infra if e.scope != "case"]
    section(
        "Infrastructure",
        [
            f"- **{e.lane}** {e.started[:16]} {e.scope} `{_line(e.name)}`: {e.signature}"
            for e in runs[:TOP]
        ],
        len(runs),
    )
    section(
        "Uncovered capabilities",
        [f"- **{lane}**: {cap}" for lane, cap in report.uncovered[:TOP]],
        len(report.uncovered),
    )
    section(
        "Known failures to revisit",
        [
            f"- **{k.lane}** `{_line(k.pattern)}`: {k.state}"
            + (f" (expires {k.expires})" if k.expires else "")
            for k in report.known_failures[:TOP]
        ],
        len(report.known_failures),
    )
    return "\n".join(out) + "\n"
