"""The report's change detection over a small hand-built history: what the last night
broke and fixed against the night before (infrastructure failures and tests that did not
run on both nights left out; a night's shards together), and the known failures that now
pass, with a quarantined entry's record over the nights."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest

from harness.history.schema import connect
from harness.history.window import WindowReader, ids
from harness.matrix.known_failures import Entry
from harness.matrix.model import HostCondition
from harness.reports import build, queries
from harness.reports.matrices import MatrixFacts
from harness.reports.model import Change, KnownFailureRow
from harness.reports.runs import Runs

TODAY = dt.date(2026, 12, 2)


class History:
    def __init__(self, path: Path) -> None:
        self.conn = connect(path)
        self.db = WindowReader(self.conn)  # what the report reads through
        self.tests: dict[str, int] = {}

    def run(self, lane: str, night: int, shard: str | None = None, build_id: str | None = None,
            **statuses: str | tuple[object, ...]) -> int:
        """One run of ``lane`` on ``night`` (hours after a fixed start): test -> status, or
        (status, message, infra signature, known-failure applied)."""
        started = f"2026-12-0{night}T0{len(self.tests) % 10}:00:00Z"
        cur = self.conn.execute(
            "INSERT INTO runs (run_key, matrix, lane, started, source, ingested, shard, build)"
            " VALUES (?, ?, ?, ?, 'test', 'now', ?, ?)",
            (f"{lane}-{night}-{shard}", lane, lane, started, shard, build_id))
        run = int(cur.lastrowid or 0)
        suite = int(self.conn.execute("INSERT INTO suites (run, name) VALUES (?, 'k')",
                                    (run,)).lastrowid or 0)
        for name, value in statuses.items():
            given = (value,) if isinstance(value, str) else value
            status, message, infra, applied = (*given, *("", None, False)[len(given) - 1:])
            nodeid = f"t.py::{name}"
            if nodeid not in self.tests:
                self.tests[nodeid] = int(self.conn.execute(
                    "INSERT INTO tests (nodeid, key) VALUES (?, ?)", (nodeid, nodeid)
                ).lastrowid or 0)
            extra = json.dumps({"known_failure": "quarantine"}) if applied else None
            self.conn.execute(
                "INSERT INTO cases (run, suite, test, status, message, infra_label, extra)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run, suite, self.tests[nodeid], status, message or None, infra, extra))
        self.conn.commit()
        return run

    def runs(self) -> Runs:
        since, until = "2026-11-01T00:00:00Z", "2026-12-31T00:00:00Z"
        return Runs(self.db.runs(since, until), since, until)


@pytest.fixture
def history(tmp_path: Path) -> History:
    return History(tmp_path / "h.sqlite")


def test_regressions_and_fixes_between_the_last_two_nights(history: History) -> None:
    history.run("cpu", 1, a="passed", b="failed", c="passed", d="xfail", e="error", f="passed",
                g="passed", h="skipped")
    history.run("cpu", 2, a="passed", b="passed", c="failed", d="xpass")
    history.run("cpu", 3, a="failed", b="passed", c=("error", "boom"), d="passed", e="passed",
                f=("failed", "", "oom-kill"), new="failed", h="failed", g="skipped")
    runs = history.runs()
    regressions, fixes, _ = build._changes(history.db, runs, ["cpu"])
    assert regressions == [Change("cpu", "t.py::a", "passed", "failed", "")]
    # c was failing already (failed -> error); d and b stayed good; e, new did not run on
    # night 2; f is an infrastructure failure; h was not run on night 2
    assert fixes == []
    regressions, fixes = queries.changes(history.db, "cpu", [1], [2])
    assert regressions == [Change("cpu", "t.py::c", "passed", "failed", "")]
    assert fixes == [Change("cpu", "t.py::b", "failed", "passed", "")]


def test_a_regression_carries_the_new_message_or_the_old(history: History) -> None:
    history.run("gpu", 1, a="passed", b=("xpass", "was lucky"))
    history.run("gpu", 2, a=("failed", "out of tolerance"), b="error")
    regressions, _ = queries.changes(history.db, "gpu", [1], [2])
    assert regressions == [Change("gpu", "t.py::a", "passed", "failed", "out of tolerance"),
                           Change("gpu", "t.py::b", "xpass", "error", "was lucky")]


def test_one_night_is_nothing_to_compare_and_shards_are_one_night(history: History) -> None:
    history.run("cpu", 1, a="failed")
    assert build._changes(history.db, history.runs(), ["cpu", "absent"])[:2] == ([], [])
    history.run("cpu", 2, shard="1/2", build_id="b7", a="passed")
    history.run("cpu", 2, shard="2/2", build_id="b7", b="failed")
    two = build._changes(history.db, history.runs(), ["cpu"])  # two nights: compared
    assert [c.key for c in two[1]] == ["t.py::a"] and two[0] == []
    history.run("cpu", 3, shard="1/2", build_id="b8", b="passed")
    history.run("cpu", 3, shard="2/2", build_id="b8", a="failed")
    runs = history.runs()
    assert [night for night, _ in runs.by_lane["cpu"]] == [1, 2, 4]
    regressions, fixes, _ = build._changes(history.db, runs, ["cpu"])
    assert [c.key for c in regressions] == ["t.py::a"] and [c.key for c in fixes] == ["t.py::b"]


def entry(pattern: str, action: str = "xfail", **kw: object) -> Entry:
    fields: dict[str, object] = {"reason": "r", "where": "m.yaml:1", "expires": None, **kw}
    return Entry(pattern=pattern, action=action, raw=pattern, **fields)  # type: ignore[arg-type]


def _known(history: History, *entries: Entry) -> list[KnownFailureRow]:
    facts = {"cpu": MatrixFacts(name="cpu", known_failures=list(entries))}
    return build._known_failures(history.db, history.runs(), facts, TODAY)


def test_known_failures_that_now_pass_and_a_quarantined_one_s_record(
        history: History) -> None:
    applied = ("xfail", "", None, True)
    history.run("cpu", 1, q=applied, x=applied, flaky="passed", h="xfail")
    history.run("cpu", 2, q="xpass", x=applied, flaky=("xfail", "", None, True), h="xfail")
    history.run("cpu", 3, q="xpass", x="xpass", flaky="xpass", h="passed", gone="passed",
                skip="skipped")
    rows = _known(history, entry("t.py::x"), entry("t.py::q", "quarantine"),
                  entry("t.py::flaky", "quarantine"), entry("t.py::skip", "quarantine"),
                  entry("t.py::h", host=HostCondition(cpu_flags=("amx",))))
    by = {row.pattern: row for row in rows}
    assert set(by) == {"t.py::x", "t.py::q", "t.py::flaky"}  # h passed where not applied
    assert (by["t.py::x"].state, by["t.py::x"].tests, by["t.py::x"].nights) == (
        "now-passing", ["t.py::x"], None)
    assert by["t.py::x"].advice == "remove the entry"
    assert by["t.py::q"].nights == (2, 3)
    assert by["t.py::q"].advice == ("intermittent: passed 2 of the last 3 nights; keep it "
                                    "quarantined until it passes every night")
    assert by["t.py::flaky"].nights == (2, 3)  # night 1 passed, night 2 failed, night 3


def test_a_quarantined_entry_that_passed_every_night_it_ran_is_to_remove(
        history: History) -> None:
    history.run("cpu", 1, q="skipped")
    history.run("cpu", 2, q="xpass", other="failed")
    history.run("cpu", 3, q="passed")
    (row,) = _known(history, entry("t.py::q", "quarantine"))
    assert row.nights == (2, 2)  # the night it skipped did not run it
    assert row.advice == "passed 2 of the last 2 nights: remove the entry"


def test_a_host_conditioned_quarantine_counts_only_where_it_applied(history: History) -> None:
    host = HostCondition(cpu_flags=("amx",))
    history.run("cpu", 1, q=("xfail", "", None, True))
    history.run("cpu", 2, q="failed")  # another host: the entry did not apply
    history.run("cpu", 3, q=("xpass", "", None, True))
    (row,) = _known(history, entry("t.py::q", "quarantine", host=host))
    assert row.nights == (1, 2)


def test_a_night_passes_only_when_every_covered_case_passed(history: History) -> None:
    history.run("cpu", 1, q1="passed", q2="xfail")
    history.run("cpu", 2, q1="passed", q2="passed")
    (row,) = _known(history, entry("t.py::q*", "quarantine"))
    assert row.nights == (1, 2) and row.tests == ["t.py::q1", "t.py::q2"]


def test_expiring_and_expired_entries(history: History) -> None:
    history.run("cpu", 1, a="xfail", b="xfail", c="xfail")
    rows = _known(history, entry("t.py::a", expires=TODAY - dt.timedelta(days=1)),
                  entry("t.py::b", expires=TODAY + dt.timedelta(days=build.EXPIRY_DAYS)),
                  entry("t.py::c", expires=TODAY + dt.timedelta(days=build.EXPIRY_DAYS + 1)),
                  entry("t.py::d", expires=TODAY))
    assert [(r.pattern, r.state, r.expires) for r in rows] == [
        ("t.py::a", "expired", "2026-12-01"), ("t.py::b", "expiring", "2026-12-16"),
        ("t.py::d", "expiring", "2026-12-02")]


def test_a_lane_without_runs_lists_only_expiry(tmp_path: Path) -> None:
    history = History(tmp_path / "h.sqlite")
    facts = {"gpu": MatrixFacts(name="gpu", known_failures=[
        entry("t.py::a", expires=TODAY - dt.timedelta(days=3)), entry("t.py::b")])}
    rows = build._known_failures(history.db, history.runs(), facts, TODAY)
    assert [(r.lane, r.pattern, r.state) for r in rows] == [("gpu", "t.py::a", "expired")]


def test_ids_are_integers_only() -> None:
    assert ids([3, 1]) == "3,1" and ids([]) == "NULL"
    with pytest.raises(ValueError):
        ids(["1; DROP TABLE runs"])  # type: ignore[list-item]
    assert isinstance(sqlite3.connect(":memory:"), sqlite3.Connection)


def test_the_passing_ids_listed_are_the_first_twenty(history: History) -> None:
    history.run("cpu", 1, **{f"p{i:02}": "xpass" for i in range(25)})
    (row,) = _known(history, entry("t.py::p*"))
    assert row.tests == [f"t.py::p{i:02}" for i in range(20)]


def test_a_quarantined_entry_is_now_passing_only_on_a_night_it_passed(
        history: History) -> None:
    """The list of known failures that now pass and a quarantined entry's record count a
    night alike: one case passing while another it covers still fails is not a pass (never
    "now passing" with "passed 0 of the last 1 nights")."""
    history.run("cpu", 1, q1="xpass", q2=("xfail", "", None, True), x="xpass")
    rows = _known(history, entry("t.py::q*", "quarantine"), entry("t.py::x", "quarantine"))
    assert [(r.pattern, r.state, r.nights) for r in rows] == [
        ("t.py::x", "now-passing", (1, 1))]
    history.run("cpu", 2, q1="xpass", q2="passed", gone="skipped")
    (row,) = _known(history, entry("t.py::q*", "quarantine"))
    assert (row.state, row.nights, row.tests) == ("now-passing", (1, 2),
                                                   ["t.py::q1", "t.py::q2"])
