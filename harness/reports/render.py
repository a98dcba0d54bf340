"""Write report.html, report.md and report.json for one model."""

from __future__ import annotations

import json
from pathlib import Path

from harness.reports.html import render_html
from harness.reports.markdown import render_markdown
from harness.reports.model import Report


def write_reports(report: Report, out: Path, *, html_url: str | None = None) -> dict[str, Path]:
    """``html_url``: what report.md links to (default: report.html beside it)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"html": out / "report.html", "md": out / "report.md", "json": out / "report.json"}
    paths["html"].write_text(render_html(report, markdown_name=paths["md"].name), encoding="utf-8")
    paths["md"].write_text(
        render_markdown(report, html_url=html_url or paths["html"].name), encoding="utf-8"
    )
    with paths["json"].open("w", encoding="utf-8") as handle:
        json.dump(report.to_dict(), handle, indent=1, sort_keys=True)
        handle.write("\n")
    return paths
