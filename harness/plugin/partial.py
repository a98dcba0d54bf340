"""Write each finished test to a JSON-lines file as it ends.

pytest writes JUnit only at the very end, so a crash, a hang killed from outside or
an OOM kill would lose every result. This file is what the runner falls back on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TextIO

import pytest


class PartialResults:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO = path.open("a", encoding="utf-8")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # One line per test: its call phase, or the setup/teardown phase that decided it.
        failed_elsewhere = report.when != "call" and (report.failed or report.skipped)
        if report.when != "call" and not failed_elsewhere:
            return
        outcome: str = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xpassed" if report.passed else "xfailed"
        record: dict[str, Any] = {
            "nodeid": report.nodeid,
            "when": report.when,
            "outcome": outcome,
            "duration": round(report.duration, 6),
            "message": _message(report),
            "properties": [[str(k), str(v)] for k, v in report.user_properties],
        }
        self._write(record)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # A module that failed to import: its node id stands for the tests it holds.
        if not report.failed:
            return
        self._write(
            {
                "nodeid": report.nodeid,
                "when": "collect",
                "outcome": "failed",
                "duration": 0.0,
                "message": str(report.longreprtext or "")[-2000:],
                "properties": [],
            }
        )

    def _write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def pytest_unconfigure(self) -> None:
        self._file.close()


def _message(report: pytest.TestReport) -> str:
    if report.passed:
        return ""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    text = str(report.longreprtext or "")
    return text[-2000:]
