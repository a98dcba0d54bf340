"""The host's CPU budget at each side of its boundaries (harness/platform/budget.py): a
quota equal to the CPUs the process may use, a v1 quota of 0 or 1 microsecond, a v1 folder
with one of its two files, a quota under one CPU, and a host without an affinity mask."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.platform.budget import cpu_budget, read_cgroup_quota


def _v1(tmp_path: Path, quota: str | None, period: str | None = "100000") -> Path:
    cpu = tmp_path / "cpu"
    cpu.mkdir(parents=True)
    if quota is not None:
        (cpu / "cpu.cfs_quota_us").write_text(quota + "\n")
    if period is not None:
        (cpu / "cpu.cfs_period_us").write_text(period + "\n")
    return tmp_path


def test_a_quota_of_exactly_the_affinity_is_the_affinity(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    (tmp_path / "cpu.max").write_text(f"{affinity * 100000} 100000\n")
    budget = cpu_budget(tmp_path)
    assert budget.cpus == affinity and budget.source == "affinity"
    (tmp_path / "cpu.max").write_text(f"{affinity * 100000 - 100000} 100000\n")
    if affinity > 1:
        assert cpu_budget(tmp_path).source == "cgroup v2 cpu.max"


def test_a_v1_quota_of_zero_is_no_quota_and_of_one_microsecond_is_one(tmp_path: Path) -> None:
    assert read_cgroup_quota(_v1(tmp_path / "zero", "0")) == (None, "cgroup v1 cfs quota")
    assert read_cgroup_quota(_v1(tmp_path / "one", "1")) == (1e-05, "cgroup v1 cfs quota")


def test_a_v1_folder_without_both_files_says_nothing(tmp_path: Path) -> None:
    assert read_cgroup_quota(_v1(tmp_path / "q", "150000", None)) == (None, "none")
    assert read_cgroup_quota(_v1(tmp_path / "p", None)) == (None, "none")


def test_a_quota_under_one_cpu_is_one_cpu(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    budget = cpu_budget(tmp_path)
    assert budget.cpus == 1 and budget.quota == 0.5 and budget.source == "cgroup v2 cpu.max"


def test_without_an_affinity_mask_the_cpu_count_says(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert cpu_budget(tmp_path).affinity == 3
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert cpu_budget(tmp_path).affinity == 1


def test_the_affinity_is_this_process_s_own(tmp_path: Path) -> None:
    mask = os.sched_getaffinity(0)
    if len(mask) < 2:
        pytest.skip("one CPU in this process's mask: nothing to narrow")
    os.sched_setaffinity(0, {min(mask)})
    try:
        assert cpu_budget(tmp_path).affinity == 1
    finally:
        os.sched_setaffinity(0, mask)
