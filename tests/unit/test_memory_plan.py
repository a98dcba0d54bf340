"""The host's memory budget (harness/platform/budget.py) and a suite's workers within it
(harness/run/memory.py);
tests/integration/test_memory_budget.py runs them for real."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError, InfraError
from harness.platform.budget import MemoryBudget, memory_budget, parse_size
from harness.run.memory import Peak, check_fits, describe, suite_peaks, workers_within


@pytest.mark.parametrize(("text", "mb"), [("600M", 600), ("24G", 24 * 1024), ("1.5GiB", 1536),
                                          ("2048", 2048), ("512k", 0.5), ("1 GB", 1024)])
def test_sizes(text: str, mb: float) -> None:
    assert parse_size(text) == mb


def _meminfo(tmp_path: Path, available_kb: int) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal: 99999999 kB\nMemAvailable: {available_kb} kB\n")
    return path


def test_the_smallest_of_the_limit_the_cgroup_and_the_host(tmp_path: Path) -> None:
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    meminfo = _meminfo(tmp_path, 8 * 1024 * 1024)  # 8 GB available
    assert memory_budget({}, cgroup, meminfo) == MemoryBudget(mb=8192, source="MemAvailable")
    (cgroup / "memory.max").write_text(str(6 << 30) + "\n")
    (cgroup / "memory.current").write_text(str(1 << 30) + "\n")  # 5 GB left in the cgroup
    assert memory_budget({}, cgroup, meminfo) == MemoryBudget(mb=5120,
                                                              source="cgroup v2 memory.max")
    (cgroup / "memory.max").write_text("max\n")
    assert memory_budget({}, cgroup, meminfo).source == "MemAvailable"
    limited = memory_budget({"HARNESS_MEMORY_LIMIT": "2G"}, cgroup, meminfo)
    assert limited == MemoryBudget(mb=2048, source="HARNESS_MEMORY_LIMIT")


def test_a_cgroup_v1_without_a_limit_is_no_limit(tmp_path: Path) -> None:
    v1 = tmp_path / "memory"
    v1.mkdir()
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    budget = memory_budget({}, tmp_path, _meminfo(tmp_path, 1024 * 1024))
    assert budget == MemoryBudget(mb=1024, source="MemAvailable")


def test_a_bad_limit_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^HARNESS_MEMORY_LIMIT='lots': expected a size"):
        memory_budget({"HARNESS_MEMORY_LIMIT": "lots"})


def test_workers_follow_the_recorded_peak() -> None:
    budget = MemoryBudget(mb=22_000, source="MemAvailable")
    assert workers_within(2, budget, None) == 2  # nothing recorded: the CPU budget
    assert workers_within(2, None, Peak(mb=18_700, test="t")) == 2  # no budget known
    assert workers_within(2, budget, Peak(mb=5_000, test="t")) == 2
    assert workers_within(8, budget, Peak(mb=5_000, test="t")) == 4
    assert workers_within(2, budget, Peak(mb=18_700, test="t")) == 1


def test_a_test_that_cannot_fit_is_an_infrastructure_line() -> None:
    budget = MemoryBudget(mb=22_000, source="cgroup v2 memory.max")
    check_fits("attn", budget, Peak(mb=21_000, test="t"))
    with pytest.raises(InfraError, match=r"^suite attn: a.py::t held 30.0 GB resident when "
                                         r"this lane last ran; this host's memory budget is "
                                         r"21.5 GB \(cgroup v2 memory.max\): it cannot fit"):
        check_fits("attn", budget, Peak(mb=30_720, test="a.py::t"))


def test_the_history_s_peak_before_the_matrix_s() -> None:
    recorded = {"attn": Peak(mb=14_200, test="a.py::t")}
    peaks = suite_peaks(recorded, {"attn": 9_000, "moe": 6_000, "small": None})
    assert peaks == {"attn": recorded["attn"],
                     "moe": Peak(mb=6_000, test="", recorded=False)}
    budget = MemoryBudget(mb=22_000, source="MemAvailable")
    with pytest.raises(InfraError, match=r"^suite moe: its tests hold up to 29.3 GB resident "
                                         r"\(the matrix's peak_memory_mb\); this host's"):
        check_fits("moe", budget, Peak(mb=30_000, test="", recorded=False))


def test_a_worker_needs_a_fresh_worker_and_the_heaviest_test_where_the_history_knows_both(
        ) -> None:
    # vLLM's test_cpu_attn.py: one process kept what its cases left and peaked at 14.6 GB;
    # a fresh worker holds 1 GB and the heaviest case grows it by 5: two workers fit 22 GB
    # (each restarted before a case that would take it past its 11 GB)
    budget = MemoryBudget(mb=22_000, source="MemAvailable")
    kept = Peak(mb=14_600, test="t", fresh_mb=1_000, heaviest_mb=5_000)
    assert kept.worker_mb == 6_000 and workers_within(2, budget, kept) == 2
    assert workers_within(4, budget, kept) == 3
    assert "a worker needs 5.9 GB a worker (a fresh worker's 1000 MB and its heaviest " \
           "test's growth, 4.9 GB, in this lane's history)" in describe("attn", 4, 3, budget, kept)
    # either figure missing: the peak, as before
    assert Peak(mb=14_600, test="t", fresh_mb=1_000).worker_mb == 14_600
    assert Peak(mb=14_600, test="t", heaviest_mb=5_000).worker_mb == 14_600
    assert workers_within(2, budget, Peak(mb=14_600, test="t", heaviest_mb=5_000)) == 1
    # never above the peak (the heaviest test ran beside what its process held), at it
    at = Peak(mb=6_000, test="a.py::t", fresh_mb=1_000, heaviest_mb=5_000)
    assert at.worker_mb == 6_000 and at.said() == "a.py::t"
    assert Peak(mb=5_000, test="t", fresh_mb=1_000, heaviest_mb=5_000).worker_mb == 5_000
    assert "its tests peaked at" in describe("attn", 4, 3, budget, at)


def test_a_suite_fits_where_a_fresh_worker_holds_its_heaviest_test() -> None:
    budget = MemoryBudget(mb=22_000, source="MemAvailable")
    check_fits("attn", budget, Peak(mb=30_000, test="t", fresh_mb=1_000, heaviest_mb=21_000))
    with pytest.raises(InfraError, match=r"^suite attn: a worker needs 21.5 GB \(a fresh "
                                         r"worker's 1000 MB and its heaviest test's growth, "
                                         r"20.5 GB, in this lane's history\); this host's"):
        check_fits("attn", budget, Peak(mb=30_000, test="t", fresh_mb=1_000, heaviest_mb=21_001))
