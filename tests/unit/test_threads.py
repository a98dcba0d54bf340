from pathlib import Path

from harness.platform.budget import CpuBudget, cpu_budget, read_cgroup_quota
from harness.run.threads import plan_threads


def test_cgroup_v2_quota_rounds_down(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("250000 100000\n")
    assert read_cgroup_quota(tmp_path) == (2.5, "cgroup v2 cpu.max")
    budget = cpu_budget(tmp_path)
    assert budget.cpus == min(2, budget.affinity)


def test_cgroup_v2_unlimited(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert read_cgroup_quota(tmp_path) == (None, "cgroup v2 cpu.max")


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    (cpu / "cpu.cfs_quota_us").write_text("150000\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    assert read_cgroup_quota(tmp_path) == (1.5, "cgroup v1 cfs quota")
    budget = cpu_budget(tmp_path)
    assert budget.cpus == 1 and budget.source == "cgroup v1 cfs quota"


def test_cgroup_v1_unlimited_uses_affinity(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu_budget(tmp_path).source == "affinity"


BUDGET8 = CpuBudget(cpus=8, source="cgroup v2 cpu.max", affinity=16, quota=8.0)


def test_workers_times_threads_never_exceed_budget() -> None:
    for requested in (None, 1, 2, 3, 5, 8, 32):
        plan = plan_threads(requested, BUDGET8, environ={})
        assert plan.workers * plan.threads_per_worker <= 8
        assert plan.env()["OMP_NUM_THREADS"] == str(plan.threads_per_worker)


def test_three_workers_on_eight_cpus_get_two_threads_each() -> None:
    plan = plan_threads(3, BUDGET8, environ={})
    assert (plan.workers, plan.threads_per_worker) == (3, 2)


def test_user_set_omp_is_left_alone() -> None:
    plan = plan_threads(2, BUDGET8, environ={"OMP_NUM_THREADS": "7"})
    assert plan.user_set and plan.env() == {}


def test_budget_off_keeps_requested_workers() -> None:
    plan = plan_threads(32, BUDGET8, environ={"HARNESS_THREAD_BUDGET": "off"})
    assert plan.workers == 32 and plan.env() == {}
