"""The report of one run folder (``harness run --report``): the nightly page for one run.

The run goes through the same ingest and report code as the nightly job, into a
throw-away history; the page lands in ``<run folder>/report/``.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.history import ingest_paths
from harness.reports.build import build_report
from harness.reports.render import write_reports

REPORT_DIR = "report"


def write_run_report(run_dir: Path, warn: Callable[[str], None]) -> Path:
    """Write report.html / .md / .json for ``run_dir``; return the HTML's path."""
    with tempfile.TemporaryDirectory(prefix="harness-report-") as tmp:
        db = Path(tmp) / "history.sqlite"
        ingest_paths(db, [run_dir], warn, workers=0)
        # Every run in the database is this one: the window only needs to hold it.
        report = build_report(db, since=dt.timedelta(days=36500), declared=False, warn=warn)
    report.database = str(run_dir)
    return write_reports(report, run_dir / REPORT_DIR)["html"]
