"""The one rule of what a suite's workers may hold (harness/plugin/memory_rules.py), at each
side of its boundaries; tests/integration/test_memory_budget.py runs it in real workers."""

from __future__ import annotations

import json
from pathlib import Path

from harness.plugin.memory_rules import Keeper, Needs, Seen, read_needs


def _keeper(**tests: float) -> Keeper:
    keeper = Keeper(1200, Needs(heaviest_mb=max(tests.values(), default=0.0), tests=tests))
    keeper.learn(Seen(nodeid="first", rss_mb=300, start_mb=235))
    return keeper


def test_the_share_is_the_budget_over_the_live_workers_and_keep_mb_for_the_last() -> None:
    keeper = _keeper(big=400)
    assert keeper.share(3) == 400 and keeper.share(2) == 600
    assert _keeper(big=800).share(2) == 600  # two live: not keep_mb's 400
    assert keeper.share(1) == 600  # keep_mb(1200, 400): half, the room beside is larger
    assert Keeper(1200, Needs(heaviest_mb=800)).share(1) == 400


def test_a_worker_over_its_share_is_restarted_and_at_it_is_not() -> None:
    keeper = _keeper()
    assert keeper.judge(Seen(nodeid="t", rss_mb=600), 2) is None
    drain = keeper.judge(Seen(nodeid="t", rss_mb=601), 2)
    assert drain is not None and not drain.retire
    assert drain.why == "601 MB resident after t, over the 600 MB a worker may use"


def test_a_test_that_held_more_than_a_share_retires_its_worker_unless_it_is_the_last() -> None:
    keeper = _keeper()
    drain = keeper.judge(Seen(nodeid="t", rss_mb=300, peak_mb=601), 2)
    assert drain is not None and drain.retire and drain.why.endswith("goes on with 1 worker(s)")
    assert keeper.judge(Seen(nodeid="t", rss_mb=300, peak_mb=600), 2) is None
    assert keeper.judge(Seen(nodeid="t", rss_mb=300, peak_mb=601), 1) is None


def test_a_queued_test_that_would_cross_the_share_restarts_its_worker_first() -> None:
    keeper = _keeper(big=300)
    assert keeper.judge(Seen(nodeid="t", rss_mb=300), 2, ["small", "big"]) is None  # 600
    drain = keeper.judge(Seen(nodeid="t", rss_mb=301), 2, ["small", "big"])
    assert drain is not None and not drain.retire
    assert drain.why == ("its test big needs 300 MB beside the 301 MB it holds, over the "
                         "600 MB a worker may use")
    assert keeper.judge(Seen(nodeid="t", rss_mb=301), 1, ["big"]) is None  # the last one


def test_a_queued_test_no_fresh_worker_could_hold_retires_its_worker() -> None:
    keeper = _keeper(huge=380)  # a fresh worker holds 235 MB: 615 > 600
    drain = keeper.judge(Seen(nodeid="t", rss_mb=250), 2, ["huge"])
    assert drain is not None and drain.retire
    assert drain.why == ("its test huge needs 380 MB, more than a fresh worker has room for "
                         "in the 600 MB a worker may use: the suite goes on with 1 worker(s)")
    keeper = _keeper(large=365)  # 600: a fresh worker can
    drain = keeper.judge(Seen(nodeid="t", rss_mb=250), 2, ["large"])
    assert drain is not None and not drain.retire


def test_what_a_run_learns_joins_what_the_history_said() -> None:
    keeper = _keeper(big=100)
    keeper.learn(Seen(nodeid="big", rss_mb=500, growth_mb=350))
    keeper.learn(Seen(nodeid="other", rss_mb=500, growth_mb=50))
    assert keeper.grew == {"big": 350, "other": 50} and keeper.heaviest_mb == 350
    keeper.learn(Seen(nodeid="big", rss_mb=500, growth_mb=200))  # the most seen stays
    assert keeper.grew["big"] == 350


def test_the_needs_file_is_read_per_suite_and_a_bad_one_is_none(tmp_path: Path) -> None:
    path = tmp_path / "test-memory.json"
    path.write_text(json.dumps({"s": {"heaviest_mb": 300.5, "tests": {"a::t": 300.5}}}))
    assert read_needs(str(path), "s") == Needs(heaviest_mb=300.5, tests={"a::t": 300.5})
    assert read_needs(str(path), "other") == Needs()
    assert read_needs(None, "s") == Needs()
    path.write_text("{not json")
    assert read_needs(str(path), "s") == Needs()
    path.write_text(json.dumps({"s": {"tests": {"a::t": "lots"}}}))
    assert read_needs(str(path), "s") == Needs()


def test_a_queued_test_of_no_known_need_is_no_reason() -> None:
    keeper = _keeper()
    assert keeper.judge(Seen(nodeid="t", rss_mb=600), 2, ["unknown"]) is None


def test_before_any_worker_is_seen_fresh_a_test_of_a_whole_share_still_fits_one() -> None:
    keeper = Keeper(1200, Needs(tests={"whole": 600, "over": 600.5}))  # no fresh size yet
    drain = keeper.judge(Seen(nodeid="t", rss_mb=1), 2, ["whole"])
    assert drain is not None and not drain.retire
    drain = keeper.judge(Seen(nodeid="t", rss_mb=1), 2, ["over"])
    assert drain is not None and drain.retire


def test_a_growth_under_one_mb_is_kept_as_it_is() -> None:
    keeper = Keeper(1200, Needs())
    keeper.learn(Seen(nodeid="tiny", rss_mb=300, growth_mb=0.5))
    assert keeper.grew == {"tiny": 0.5}
