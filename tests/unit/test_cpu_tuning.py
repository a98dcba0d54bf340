"""The agent's host-tuned CPU settings and an emulated CPU (harness/platform/cpu_tuning.py):
which are left out, the lane's own winning, none on the agent's own CPU, the scripts'
copy being the same code, and a manifest from before the field."""

from __future__ import annotations

import pytest

from harness.matrix import load_matrix
from harness.platform.cpu_emulation import describe_left_out, lane_environ, left_out
from harness.platform.cpu_tuning import HOST_TUNED, host_tuned, tuning_source
from harness.results.facts import HostRecord

AGENT = {"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx512", "PATH": "/bin",
         "OMP_NUM_THREADS": "2"}


def test_the_host_tuned_settings_are_left_out_and_nothing_else() -> None:
    assert host_tuned(AGENT) == {"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx512"}
    assert host_tuned(AGENT, lane={"OPENBLAS_CORETYPE"}) == {"ATEN_CPU_CAPABILITY": "avx512"}
    assert host_tuned({"PATH": "/bin"}) == {}


def test_only_a_lane_with_an_emulated_cpu_leaves_them_out() -> None:
    v3 = load_matrix("cpu-v3")
    assert left_out(v3, environ=AGENT) == {"OPENBLAS_CORETYPE": "Haswell",
                                            "ATEN_CPU_CAPABILITY": "avx512"}
    assert left_out(v3, given=["ATEN_CPU_CAPABILITY"], environ=AGENT) == {
        "OPENBLAS_CORETYPE": "Haswell"}
    assert lane_environ(v3, environ=AGENT) == {"PATH": "/bin", "OMP_NUM_THREADS": "2"}
    cpu = load_matrix("cpu")
    assert left_out(cpu, environ=AGENT) == {}
    assert lane_environ(cpu, environ=AGENT) == AGENT


def test_the_line_names_each_setting_and_nothing_is_said_for_none() -> None:
    line = describe_left_out({"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1"})
    assert line.startswith("cpu: this agent's OPENBLAS_CORETYPE=Haswell, OPENBLAS_L2_SIZE=1 "
                           "left out")
    assert describe_left_out({}) == ""


def test_a_scripts_rule_is_the_same_code() -> None:
    space: dict[str, object] = {}
    exec(compile("from __future__ import annotations\n" + tuning_source(), "<script>",
                 "exec"), space)
    assert space["HOST_TUNED"] == HOST_TUNED
    rule = space["host_tuned"]
    assert callable(rule) and rule(AGENT, {"ATEN_CPU_CAPABILITY": "x"}) == {
        "OPENBLAS_CORETYPE": "Haswell"}


def test_a_manifest_from_before_the_field_reads_as_none_left_out() -> None:
    old = {"machine": "x86_64", "cpu": "AMD EPYC", "cpu_emulated": "Haswell-v4",
           "agent_cpu": "AMD EPYC 9B45"}
    assert HostRecord.from_json(old).agent_env_left_out == {}
    new = HostRecord.from_json({**old, "agent_env_left_out": {"OPENBLAS_CORETYPE": "Haswell",
                                                               "bad": 3}})
    assert new.agent_env_left_out == {"OPENBLAS_CORETYPE": "Haswell"}
    assert HostRecord.from_json(new.to_json()) == new


def test_a_run_leaves_them_out_here_and_not_in_a_container(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The local runner's suites inherit the agent's environment less the settings; a
    container inherits only its allowlist, so nothing is said left out there; a setting
    the run gives itself (``--env``, repro's restored environment) is the lane's."""
    from harness.roots import project_root
    from harness.run.request import RunContext, RunRequest
    from harness.runners.local import LocalRunner

    for name in HOST_TUNED:  # whatever this agent sets for its own CPU
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    matrix = load_matrix("cpu-v3")
    here = RunContext(request=RunRequest(matrix="cpu-v3", docker=False), root=project_root(),
                      matrix=matrix)
    assert here.left_out == {"OPENBLAS_CORETYPE": "Haswell"}
    assert isinstance(here.runner, LocalRunner) and here.runner.base_env is not None
    assert "OPENBLAS_CORETYPE" not in here.runner.base_env
    assert "PATH" in here.runner.base_env
    given = RunContext(request=RunRequest(matrix="cpu-v3", env={"OPENBLAS_CORETYPE": "x"}),
                       root=project_root(), matrix=matrix)
    assert given.left_out == {}
    boxed = RunContext(request=RunRequest(matrix="cpu-v3", docker=True), root=project_root(),
                       matrix=matrix)
    assert boxed.runner.in_container and boxed.left_out == {}
    own = RunContext(request=RunRequest(matrix="cpu"), root=project_root(),
                     matrix=load_matrix("cpu"))
    assert own.left_out == {} and isinstance(own.runner, LocalRunner)
    assert own.runner.base_env is None
