"""The boundaries of the run's memory rules (harness/run/memory.py): the cgroup's room, the
budget's rounding, the workers that fit at a peak, the lone worker's keep, a suite that
cannot fit, and the sizes its lines print; tests/unit/test_memory_plan.py has the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import InfraError
from harness.platform.budget import MemoryBudget, memory_budget
from harness.plugin.memory_rules import keep_mb
from harness.run.memory import Peak, check_fits, describe, lone_needs_xdist, workers_within

MB = 1 << 20
V2 = "cgroup v2 memory.max"


def _cgroup(tmp_path: Path, limit: str, used: str | None = None) -> Path:
    """A cgroup v2 folder with its memory.max and, where given, its memory.current."""
    root = tmp_path / "cgroup"
    root.mkdir(parents=True)
    (root / "memory.max").write_text(limit + "\n")
    if used is not None:
        (root / "memory.current").write_text(used + "\n")
    return root


def _no_meminfo(tmp_path: Path) -> Path:
    return tmp_path / "no-meminfo"  # never written: the cgroup alone says


def test_a_limit_of_two_to_the_sixty_bytes_is_no_limit(tmp_path: Path) -> None:
    root = _cgroup(tmp_path, str(1 << 60), used="0")
    assert memory_budget({}, root, _no_meminfo(tmp_path)) is None


def test_a_limit_one_byte_under_two_to_the_sixty_is_a_limit(tmp_path: Path) -> None:
    root = _cgroup(tmp_path, str((1 << 60) - MB), used="0")
    budget = memory_budget({}, root, _no_meminfo(tmp_path))
    assert budget == MemoryBudget(mb=float((1 << 40) - 1), source=V2)


def test_a_cgroup_limit_of_max_with_nothing_else_is_no_budget(tmp_path: Path) -> None:
    root = _cgroup(tmp_path, "max", used="0")
    assert memory_budget({}, root, _no_meminfo(tmp_path)) is None


def test_a_cgroup_whose_usage_is_not_written_has_its_whole_limit(tmp_path: Path) -> None:
    # 1000.25 MB rounds down to the tenth and 1000.75 up: one byte more or less moves either
    quarter = _cgroup(tmp_path / "a", str(1000 * MB + MB // 4))
    assert memory_budget({}, quarter, _no_meminfo(tmp_path)) == MemoryBudget(mb=1000.2,
                                                                               source=V2)
    three_quarters = _cgroup(tmp_path / "b", str(1000 * MB + 3 * MB // 4))
    assert memory_budget({}, three_quarters, _no_meminfo(tmp_path)) == MemoryBudget(
        mb=1000.8, source=V2)


def test_a_cgroup_whose_usage_is_zero_has_its_whole_limit(tmp_path: Path) -> None:
    root = _cgroup(tmp_path, str(1000 * MB + MB // 4), used="0")
    assert memory_budget({}, root, _no_meminfo(tmp_path)) == MemoryBudget(mb=1000.2, source=V2)


def test_a_cgroup_past_its_limit_leaves_no_room_and_says_zero(tmp_path: Path) -> None:
    root = _cgroup(tmp_path, str(4 * MB), used=str(4 * MB + 512))
    budget = memory_budget({}, root, _no_meminfo(tmp_path))
    assert budget == MemoryBudget(mb=0.0, source=V2)
    with pytest.raises(InfraError, match=r"this host's memory budget is 0 MB \(cgroup v2 "):
        check_fits("attn", budget, Peak(mb=100, test="a.py::t"))


def test_a_cgroup_at_its_limit_leaves_no_room(tmp_path: Path) -> None:
    root = _cgroup(tmp_path, str(4 * MB), used=str(4 * MB))
    assert memory_budget({}, root, _no_meminfo(tmp_path)) == MemoryBudget(mb=0.0, source=V2)


def test_a_peak_of_nothing_leaves_the_cpu_workers() -> None:
    budget = MemoryBudget(mb=10_000, source="MemAvailable")
    assert workers_within(6, budget, Peak(mb=0, test="t")) == 6


def test_a_peak_under_one_mb_still_divides_the_budget() -> None:
    budget = MemoryBudget(mb=3, source="MemAvailable")
    assert workers_within(16, budget, Peak(mb=0.5, test="t")) == 6
    assert workers_within(16, budget, Peak(mb=1, test="t")) == 3


def test_a_peak_over_the_whole_budget_still_gets_one_worker() -> None:
    budget = MemoryBudget(mb=10_000, source="MemAvailable")
    assert workers_within(4, budget, Peak(mb=12_000, test="t")) == 1


def test_a_peak_of_exactly_half_the_budget_runs_its_lone_worker_without_xdist() -> None:
    budget = MemoryBudget(mb=12_000, source="MemAvailable")
    assert not lone_needs_xdist(budget, Peak(mb=6_000, test="t"))
    assert not lone_needs_xdist(budget, Peak(mb=5_000, test="t"))
    assert lone_needs_xdist(budget, Peak(mb=6_001, test="t"))


def test_no_budget_or_no_peak_needs_no_xdist_for_a_lone_worker() -> None:
    assert not lone_needs_xdist(None, Peak(mb=8_000, test="t"))
    assert not lone_needs_xdist(MemoryBudget(mb=12_000, source="MemAvailable"), None)


def test_the_keep_leaves_room_for_the_heaviest_test_beside_it() -> None:
    # one rule for a suite's lone worker and the scheduler's last (plugin/memory.py)
    assert keep_mb(12_000, 8_000) == 4_000
    assert keep_mb(12_000, 6_001) == 5_999
    assert keep_mb(12_000, 6_000) == 6_000  # never above half the budget
    assert keep_mb(12_000, 0.0) == 6_000  # nothing known of the heaviest: half


def test_the_keep_is_at_least_one_mb() -> None:
    assert keep_mb(12_000, 11_999.5) == 1.0
    assert keep_mb(12_000, 11_998.5) == 1.5
    assert keep_mb(12_000, 13_000) == 1.0


def test_a_peak_of_exactly_the_budget_fits() -> None:
    budget = MemoryBudget(mb=12_000, source="MemAvailable")
    check_fits("attn", budget, Peak(mb=12_000, test="a.py::t"))
    with pytest.raises(InfraError, match=r"^suite attn: a.py::t held 11.7 GB resident"):
        check_fits("attn", budget, Peak(mb=12_001, test="a.py::t"))


def test_no_budget_or_no_peak_always_fits() -> None:
    check_fits("attn", None, Peak(mb=10**9, test="a.py::t"))
    check_fits("attn", MemoryBudget(mb=1, source="MemAvailable"), None)


def test_the_line_names_the_test_it_peaked_in() -> None:
    line = describe("attn", 8, 2, MemoryBudget(mb=12_288, source="MemAvailable"),
                    Peak(mb=5_120, test="a.py::t"))
    assert line == ("suite attn: 2 worker(s), not 8: its tests peaked at 5.0 GB a worker "
                    "(a.py::t), the memory budget is 12.0 GB (MemAvailable)")


def test_the_line_names_the_matrix_before_any_history() -> None:
    line = describe("moe", 8, 2, MemoryBudget(mb=12_288, source="MemAvailable"),
                    Peak(mb=5_120, test="", recorded=False))
    assert "(the matrix's peak_memory_mb)" in line


@pytest.mark.parametrize(("mb", "said"), [(1023, "1023 MB"), (1024, "1.0 GB"),
                                          (102_400, "100.0 GB"), (500.4, "500 MB")])
def test_a_size_is_in_mb_under_a_gb_and_in_gb_from_one(mb: float, said: str) -> None:
    line = describe("attn", 4, 1, MemoryBudget(mb=mb, source="MemAvailable"),
                    Peak(mb=mb, test="t"))
    assert line.endswith(f"peaked at {said} a worker (t), the memory budget is {said} "
                         "(MemAvailable)")
