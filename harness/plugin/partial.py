"""Each test's result and properties, written as it ends; what started and was collected.

pytest writes JUnit only at the very end, so a crash, a hang killed from outside or an
OOM kill would lose every result. ``<stem>.partial.jsonl`` (one line per finished test:
node id, outcome, duration, message and the test's properties) is what the runner falls
back on, and it is also where the per-test properties live: xunit2 JUnit has no
``<properties>`` per test case, so they are taken off the reports before pytest's JUnit
writer sees them and the history reads them from here (``results/sidecar.py``).
``<stem>.progress.jsonl`` records the collected node ids once and each test as it starts,
so a crash or a hang names the test that was running and lists the ones never run.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import pytest
from _pytest.junitxml import xml_key

from harness.results.sidecar import release_mismatch, result_line

COLLECTION = "collection failure"  # pytest's JUnit message for a module that failed to import

# pytest warns that record_property has no place in xunit2 JUnit: here it has one.
XUNIT2_WARNING = "ignore:record_property is incompatible with junit_family:pytest.PytestWarning"
_MESSAGE_LIMIT = 1000


@dataclass
class _Result:
    """A test's line in the making, phase by phase: the first phase that did not pass
    decides it."""

    when: str
    outcome: str = "passed"
    duration: float = 0.0
    message: str = ""
    details: str = ""
    properties: list[tuple[str, object]] = field(default_factory=list)


class PartialResults:
    """Registered in the controller process (not in xdist workers) by the plugin."""

    def __init__(self, config: pytest.Config, path: Path, progress: Path) -> None:
        self._config = config
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO = path.open("a", encoding="utf-8")
        self._progress: TextIO = progress.open("a", encoding="utf-8")
        self._collected = False
        self._open: dict[tuple[str, object], _Result] = {}  # tests not yet torn down

    # -- progress ------------------------------------------------------------------------

    def _collected_ids(self, ids: list[str]) -> None:
        if self._collected:
            return
        self._collected = True
        # What a salvaged JUnit file's <testsuite> says besides its cases: the suite
        # properties known by now (the plugin's, added at session start) and when.
        xml = self._config.stash.get(xml_key, None)
        properties = dict(getattr(xml, "global_properties", None) or ())
        suite = {"timestamp": dt.datetime.now(dt.UTC).astimezone().isoformat(),
                 "hostname": platform.node(), "properties": properties}
        self._progress.write(json.dumps({"collected": ids, "suite": suite}) + "\n")
        self._progress.flush()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._collected_ids([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        # Under xdist the workers collect (every worker the same ids, selection applied).
        self._collected_ids(list(ids))

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        # Flushed, not synced: a crashed process loses nothing the OS already holds.
        self._progress.write(json.dumps({"started": nodeid}) + "\n")
        self._progress.flush()

    # -- results -------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """One line per test once its teardown is reported: the first phase that did not
        pass decides it (a teardown error after a pass is an error of the test)."""
        key = (report.nodeid, getattr(report, "worker_id", None))
        record = self._open.get(key)
        if record is None or report.when == "setup":
            record = self._open[key] = _Result(when=report.when)
        record.duration += report.duration
        if record.outcome == "passed" and (report.when == "call" or not report.passed):
            outcome: str = report.outcome
            if hasattr(report, "wasxfail"):
                outcome = "xpassed" if report.passed else "xfailed"
            record.message, record.details = _messages(report)
            record.when, record.outcome = report.when, outcome
        record.properties = list(report.user_properties)
        # xunit2 has no per-case <properties>: pytest's JUnit writer must not see them.
        report.user_properties = []
        if report.when == "teardown":
            del self._open[key]
            self._write_record(report.nodeid, record)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # A module that failed to import: its node id stands for the tests it holds.
        if report.failed:
            details = str(report.longreprtext or "")[-2000:]
            across = self._config.getoption("--harness-release-mismatch")
            message = release_mismatch(COLLECTION, across) if across else COLLECTION
            self._write(result_line(report.nodeid, "collect", "failed", 0.0, message, (),
                                    details))

    def pytest_sessionfinish(self) -> None:
        """A test decided without a teardown report (an xdist worker that crashed in it:
        xdist reports its failure alone) still gets its line; one still undecided (the
        test Ctrl-C stopped) is left to the runner, as a test that was running."""
        for (nodeid, _), record in list(self._open.items()):
            if record.outcome != "passed":
                self._write_record(nodeid, record)
        self._open.clear()

    def _write_record(self, nodeid: str, record: _Result) -> None:
        self._write(result_line(nodeid, record.when, record.outcome, record.duration,
                                record.message, record.properties, record.details))

    def _write(self, line: str) -> None:
        self._file.write(line)
        self._file.flush()
        os.fsync(self._file.fileno())

    def pytest_unconfigure(self) -> None:
        self._file.close()
        self._progress.close()


def _messages(report: pytest.TestReport) -> tuple[str, str]:
    """(message, details) of a report as pytest's JUnit writer words them: the one-line
    cause (the exception, the skip or xfail reason) and the report's last 2000 characters."""
    if report.passed and not hasattr(report, "wasxfail"):
        return "", ""
    details = str(report.longreprtext or "")[-2000:]
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail).removeprefix("reason: "), "" if report.passed else details
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: "), ""
    crash = getattr(report.longrepr, "reprcrash", None)
    cause = str(crash.message) if crash is not None else details.strip().split("\n")[-1]
    if report.when in ("setup", "teardown"):
        cause = f'failed on {report.when} with "{cause}"'
    return cause[:_MESSAGE_LIMIT], details
