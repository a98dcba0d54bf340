"""plugin/memory.py's scheduler judges tests when it hands them to a worker, not only at the
worker's next report: xdist's own work-stealing scheduler, driven here through the calls its
controller makes, with stand-in workers that record what they are sent (the real workers'
run is tests/integration/test_memory_budget.py, where this race is rare)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from harness.plugin.memory import make_recycling
from harness.plugin.memory_rules import Keeper, Needs, Seen

TESTS = [f"t{i}" for i in range(7)] + ["big"]


@dataclass(eq=False)
class Node:
    name: str
    sent: list[int] = field(default_factory=list)
    steals: list[list[int]] = field(default_factory=list)
    shutdowns: int = 0

    @property
    def gateway(self) -> SimpleNamespace:
        return SimpleNamespace(id=self.name)

    @property
    def shutting_down(self) -> bool:
        return self.shutdowns > 0

    def shutdown(self) -> None:
        self.shutdowns += 1

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def send_steal(self, indices: list[int]) -> None:
        self.steals.append(list(indices))


class Config:
    def getvalue(self, name: str) -> Any:
        assert name == "tx"
        return ["2*popen"]


def _started(keeper: Keeper) -> tuple[Any, Node, Node]:
    sched: Any = make_recycling(Config(), SimpleNamespace(workstealsched=lambda *a: None),
                                keeper)
    a, b = Node("gw0"), Node("gw1")
    for node in (a, b):
        sched.add_node(node)
        sched.add_node_collection(node, TESTS)
    sched.schedule()
    assert a.sent == [0, 1, 2, 3] and b.sent == [4, 5, 6, 7]
    return sched, a, b


def _a_runs_its_queue_then_b_gives_up_half(sched: Any, a: Node, b: Node, held: float) -> None:
    """gw0 runs t0..t2, holding ``held`` MB after each; with one test left it is idle, and the
    scheduler steals gw1's last two (t6 and big) back for it."""
    for i in range(3):
        sched.note(a, Seen(nodeid=TESTS[i], rss_mb=held))
        sched.mark_test_complete(a, i)
    assert b.steals == [[6, 7]]
    sched.remove_pending_tests_from_node(b, [6, 7])


def test_a_test_that_would_not_fit_beside_what_a_worker_holds_is_not_handed_to_it() -> None:
    sched, a, b = _started(Keeper(1200, Needs(heaviest_mb=300, tests={"big": 300})))
    _a_runs_its_queue_then_b_gives_up_half(sched, a, b, held=470)
    assert a.sent == [0, 1, 2, 3]  # neither t6 nor big: they wait for a fresh worker
    assert a.shutting_down and a not in sched.retiring
    assert sched.draining[a] == ("its test big needs 300 MB beside the 470 MB it holds, over "
                                 "the 600 MB a worker may use")
    assert sched.pending == [6, 7]
    fresh = Node("gw2")  # the controller's clone of gw0: nothing known of it, it gets them
    sched.add_node(fresh)
    sched.add_node_collection(fresh, TESTS)
    sched.schedule()
    assert fresh.sent == [6, 7]


def test_a_test_that_fits_beside_what_a_worker_holds_is_handed_to_it() -> None:
    sched, a, b = _started(Keeper(1200, Needs(heaviest_mb=300, tests={"big": 300})))
    _a_runs_its_queue_then_b_gives_up_half(sched, a, b, held=300)  # 300 + 300: at its share
    assert a.sent == [0, 1, 2, 3, 6, 7] and a.shutdowns == 0 and not sched.draining


def test_a_test_no_fresh_worker_has_room_for_retires_the_worker_it_would_go_to() -> None:
    keeper = Keeper(1200, Needs(heaviest_mb=300, tests={"big": 300}))
    keeper.learn(Seen(nodeid="t", rss_mb=420, start_mb=301))  # a fresh worker holds 301
    sched, a, b = _started(keeper)
    _a_runs_its_queue_then_b_gives_up_half(sched, a, b, held=420)
    assert a.sent == [0, 1, 2, 3] and a.shutting_down and a in sched.retiring
    assert "more than a fresh worker has room for" in sched.draining[a]
