"""A known failure conditioned on the host's CPU reads the flags the kernels see: under an
``ONEDNN_MAX_CPU_ISA`` cap, the flags above it are absent, through the plugin's own path (a
real pytest process with the harness plugin, not a call of the helper).

The entry says ``host: {cpu_flags_absent: [F]}`` for F, the highest flag this host reports
that the cap can hide. Capped just below F, the entry applies and the failing test is its
strict xfail; without the cap, the host has F, the entry does not apply and the test fails.
"""

from __future__ import annotations

import pytest

from harness.platform.host import FLAG_ISA, ONEDNN_ISA, cpu_flags
from harness.roots import project_root

TEST = """
def test_kernel_refuses():
    assert False, "could not create a primitive descriptor"
"""


def _flag_and_cap() -> tuple[str, str]:
    """The highest flag this host has that a cap can hide, and the cap just below it."""
    hideable = [f for f in cpu_flags() if f in FLAG_ISA]
    if not hideable:
        pytest.skip("this host reports no CPU flag oneDNN's cap can hide (not x86-64)")
    flag = max(hideable, key=lambda f: ONEDNN_ISA.index(FLAG_ISA[f]))
    return flag, ONEDNN_ISA[ONEDNN_ISA.index(FLAG_ISA[flag]) - 1]


def _matrix(pytester: pytest.Pytester, flag: str) -> str:
    path = pytester.path / "capped.yaml"
    path.write_text(
        f"extends: {project_root() / 'matrices' / 'cpu.yaml'}\nname: capped\n"
        "known_failures:\n"
        "  - id: test_cap.py::test_kernel_refuses\n"
        "    reason: the kernel has no path without this flag\n"
        "    action: xfail\n"
        f"    host: {{cpu_flags_absent: [{flag}]}}\n")
    return str(path)


@pytest.mark.parametrize("capped", [True, False], ids=["capped", "uncapped"])
def test_the_plugin_applies_a_host_entry_by_the_flags_under_the_cap(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capped: bool) -> None:
    flag, cap = _flag_and_cap()
    spec = _matrix(pytester, flag)
    pytester.makepyfile(test_cap=TEST)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    if capped:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    else:
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    result = pytester.runpytest_subprocess("--platform", spec, "-p", "no:cacheprovider",
                                           "-rxf")
    if capped:  # the kernels see no `flag`: the entry holds
        result.assert_outcomes(xfailed=1)
        result.stdout.fnmatch_lines(["*XFAIL*the kernel has no path without this flag*"])
    else:  # the host has `flag`: the entry does not apply, the failure is a failure
        result.assert_outcomes(failed=1)
