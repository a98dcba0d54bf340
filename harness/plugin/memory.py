"""Each test's peak resident memory, and xdist workers kept within a memory budget.

Every test process (an xdist worker, or pytest itself without xdist) resets its peak
resident set (Linux's ``/proc/self/clear_refs``) when a test starts and reads it once the
test is torn down: the process's whole resident set at its highest during that test (the
interpreter and what earlier tests left included). Where that is the highest of the test's
file in this process so far, the test gets it as its ``peak_rss_mb`` property, which the
sidecar and the history keep beside its duration; the manifest keeps the suite's highest.

Each test's growth (how far above where it started the test took its process) is its
``rss_growth_mb`` property: what the test itself needs, whatever earlier tests left in its
process; the history keeps it per test.

With ``--harness-memory-mb=TOTAL`` (the suite's whole memory budget: the run hands it the
host's, platform/budget.py) under xdist's ``-n W``, the controller schedules by work
stealing (xdist's ``worksteal``) and keeps each worker within its share, TOTAL over the
workers still running, watching each worker's resident memory after each test:

- a worker above its share takes no new test: the tests queued for it go back to the others,
  it finishes the one it is running (and the one it already holds as next: xdist's worker
  needs it to tear down), it is shut down between tests and a fresh worker takes its place,
  with one line saying so (vLLM's test_cpu_attn.py: a worker grew to 18.7 GB over a file's
  cases, where one case alone needs 5 GB; restarted, never killed by the OOM killer);
- a worker whose next test would take it over its share (that test's growth, from the
  history's per-test figures in ``--harness-test-memory=FILE``, or seen earlier in this run,
  beside what the worker holds) is restarted the same way first; where that test would not
  fit a fresh worker's share either, the worker stops and is not replaced (tests are
  judged at each report, against the worker's queue, and when they are handed to it, against
  what it held at its last report: the controller acts on reports as they come, and a worker
  whose tests end faster than the controller answers runs ahead of it: a steal names tests it
  may have started, and then takes none);
- a test that held more than a worker's share while it ran and let it go after (vLLM's
  test_cpu_attn.py has cases of 14 GB on a 24 GB host, where two workers share 12 GB each)
  is not helped by a restart: its worker is drained the same way and not replaced, and the
  suite goes on with one worker fewer (never none), each of the rest with a larger share.

The last worker left, and a suite's lone worker (the plan gives a suite whose tests may take
one process past half the budget an xdist worker all the same, run/memory.py), keep by one
rule, :func:`keep_mb`: no more than leaves room beside it for the heaviest test (the file's
``heaviest_mb``, or the largest growth seen here), and never more than half the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import pytest

from harness.plugin.memory_rules import Keeper, Needs, Seen
from harness.plugin.teardown import OnTeardown
from harness.results.sidecar import GROWTH_PROPERTY
from harness.results.sidecar import PEAK_RSS_PROPERTY as PROPERTY

RSS_ATTR = "harness_rss_mb"  # a teardown report's current resident memory, for the controller
PEAK_ATTR = "harness_peak_mb"  # and the test's peak, for the controller
GROWTH_ATTR = "harness_growth_mb"  # and how far above its start the test took the process
START_ATTR = "harness_start_mb"  # and what the process held when the test started
GROWTH_RECORDED_MB = 10.0  # a test's growth below this is noise, not recorded
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_mb() -> dict[str, float]:
    """This process's ``Vm*`` sizes in MB (``VmHWM``, ``VmRSS``, ...), read once; none
    where /proc has none."""
    try:
        text = _STATUS.read_text()
    except OSError:
        return {}
    return {name: int(rest.split()[0]) / 1024 for name, _, rest in
            (line.partition(":") for line in text.splitlines())
            if name.startswith("Vm") and rest.strip().endswith("kB")}


def reset_peak() -> bool:
    """Start the peak resident set anew from the current one (Linux 4.0+)."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


class TestMemory(OnTeardown):
    """In every process that runs tests: each test's peak, on its teardown report, where it
    is the highest of its file in this process so far (the file's and the suite's peak per
    process stay exact, and the history stores a few values a file, not one a test)."""

    def __init__(self) -> None:
        self._resets = True
        self._file_peak: dict[str, float] = {}
        self._start_mb: float | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self._start_mb = _status_mb().get("VmRSS")
        if self._resets:
            self._resets = reset_peak()

    def teardown(self, item: pytest.Item, report: pytest.TestReport) -> None:
        # Without a reset (no clear_refs) the peak is the process's since it started.
        sizes = _status_mb()
        peak, rss = sizes.get("VmHWM"), sizes.get("VmRSS")
        file = item.nodeid.split("::", 1)[0]
        if peak is not None and peak > self._file_peak.get(file, 0.0):
            self._file_peak[file] = peak
            report.user_properties.append((PROPERTY, round(peak, 1)))
        if rss is not None:
            setattr(report, RSS_ATTR, round(rss, 1))
        if peak is not None:
            setattr(report, PEAK_ATTR, round(peak, 1))
            if self._resets and self._start_mb is not None:
                growth = round(max(0.0, peak - self._start_mb), 1)
                setattr(report, GROWTH_ATTR, growth)
                setattr(report, START_ATTR, round(self._start_mb, 1))
                if growth >= GROWTH_RECORDED_MB:
                    report.user_properties.append((GROWTH_PROPERTY, growth))


class Gateway(Protocol):
    id: str


class Worker(Protocol):
    """What the scheduler uses of an xdist worker (``xdist.workermanage.WorkerController``,
    untyped)."""

    gateway: Gateway
    shutting_down: bool

    def shutdown(self) -> None: ...

    def send_steal(self, indices: Sequence[int]) -> None: ...

    def ensure_teardown(self) -> None: ...


class Scheduler(Protocol):
    """What the controller's hooks use of the scheduler ``make_recycling`` makes."""

    draining: dict[Worker, str]
    retiring: set[Worker]
    tests_finished: bool

    def note(self, node: Worker, seen: Seen) -> None: ...


def make_recycling(config: pytest.Config, log: object, keeper: Keeper) -> Scheduler:
    """xdist's work-stealing scheduler that drains a worker ``keeper`` says must go, and
    takes its queued tests back for the others."""
    from xdist.scheduler.worksteal import (  # type: ignore[import-untyped]
        MIN_PENDING,
        WorkStealingScheduling,
    )

    class Recycling(WorkStealingScheduling):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(config, log)
            self.draining: dict[Worker, str] = {}  # node -> why
            self.retiring: set[Worker] = set()  # drained for good: not replaced
            self.holds: dict[Worker, Seen] = {}  # node -> its last report

        def note(self, node: Worker, seen: Seen) -> None:
            keeper.learn(seen)
            self.holds[node] = seen
            if node not in self.node2pending or node in self.draining:
                return
            # its queue after the running test and the one it holds (those it can give back)
            self._judge(node, seen, self.node2pending[node][MIN_PENDING:])

        def _judge(self, node: Worker, seen: Seen, indices: Sequence[int]) -> None:
            live = [n for n in self.node2pending if n not in self.retiring]
            drain = keeper.judge(seen, len(live), [self.collection[i] for i in indices])
            if drain is not None:
                self.draining[node] = drain.why
                if drain.retire:
                    self.retiring.add(node)

        def _send_tests(self, node: Worker, num: int) -> None:
            # Tests handed to a worker that asks for more start at once (the first is its
            # next, the second the one it holds): judged now, beside what it held at its last
            # report, not at its next one, when they are already under way.
            if node in self.holds and node not in self.draining:
                last = self.holds[node]  # its peak was judged with it
                self._judge(node, Seen(nodeid=last.nodeid, rss_mb=last.rss_mb),
                            self.pending[:num])
            if node not in self.draining:
                super()._send_tests(node, num)
            elif not node.shutting_down and len(self.node2pending[node]) <= MIN_PENDING:
                node.shutdown()  # it finishes what it runs; a fresh one takes these tests

        def _drain(self) -> None:
            for node in list(self.draining):
                pending = self.node2pending.get(node)
                if pending is None or node.shutting_down:
                    continue
                if len(pending) <= MIN_PENDING:  # the running test and the one it holds
                    node.shutdown()
                elif self.steal_requested_from_node is None:  # type: ignore[has-type]
                    node.send_steal(pending[MIN_PENDING:])
                    self.steal_requested_from_node = node

        def check_schedule(self) -> None:
            self._drain()
            super().check_schedule()

    return Recycling()


class WorkerBudget:
    """In the xdist controller: the scheduler above, and a fresh worker for each drained
    one."""

    def __init__(self, config: pytest.Config, total_mb: float, needs: Needs) -> None:
        self.config = config
        self.keeper = Keeper(total_mb, needs)
        self.sched: Scheduler | None = None
        self.restarts: list[str] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: object
                                    ) -> Scheduler | None:
        if config.getvalue("dist") not in ("load", "worksteal"):
            return None  # the suite chose how its tests group (loadfile, loadscope, ...)
        try:
            self.sched = make_recycling(config, log, self.keeper)
        except ImportError:  # an xdist before 3.2 has no work stealing: workers as they were
            return None
        return self.sched

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        rss = getattr(report, RSS_ATTR, None)
        peak = getattr(report, PEAK_ATTR, None)
        growth = getattr(report, GROWTH_ATTR, None)
        start = getattr(report, START_ATTR, None)
        node = getattr(report, "node", None)
        if self.sched is not None and report.when == "teardown" and rss is not None and node:
            self.sched.note(node, Seen(nodeid=report.nodeid, rss_mb=float(rss), peak_mb=_mb(peak),
                                       growth_mb=_mb(growth), start_mb=_mb(start)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Worker, error: object | None) -> None:
        sched = self.sched
        why = sched.draining.pop(node, None) if sched is not None else None
        if sched is None or why is None or error is not None:
            return  # a crash: xdist replaces the worker itself, or gives up
        dsession = self.config.pluginmanager.getplugin("dsession")
        if dsession is None or dsession.shuttingdown or sched.tests_finished:
            return
        name = node.gateway.id
        # Its process ends now, and with it what it holds: xdist would keep a finished
        # worker's process, idle, until the session ends (its teardown), and a restart
        # would then add a fresh worker's memory to the old one's.
        node.ensure_teardown()
        if node in sched.retiring:
            line = f"harness: worker {name} stopped between tests: {why}"
        else:
            clone = dsession._clone_node(node)  # how xdist replaces a crashed worker (1.x+)
            line = f"harness: worker {name} restarted between tests as {clone.gateway.id}: {why}"
        self.restarts.append(line)
        reporter = self.config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.restarts:
            terminalreporter.write_line(
                f"harness: {len(self.restarts)} worker restart(s) or stop(s) for memory "
                f"(the suite's budget {self.keeper.total_mb:.0f} MB)")


def _mb(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]
