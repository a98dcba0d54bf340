"""The nightly coverage report: a data model built from the history, rendered three ways."""

from __future__ import annotations

from harness.reports.build import build_report
from harness.reports.model import Report
from harness.reports.render import write_reports

__all__ = ["Report", "build_report", "write_reports"]
