"""Each test's memory as plugin/memory.py's TestMemory measures it: the kernel's Vm* sizes
(read from a real /proc/self/status), the peak's reset, and what a pytest run records per
test (peak where its file's rose, growth where the peak was reset first) in the sidecar,
with the process's sizes held fixed so that ties and decimals are exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.plugin import memory

STATUS = Path("/proc/self/status")
pytestmark = pytest.mark.skipif(not STATUS.exists(), reason="Linux's /proc")
FLAT = """
def test_a():
    pass


def test_b():
    pass


def test_c():
    pass
"""


def test_the_sizes_are_the_kernels_vm_lines_in_mb(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "status"
    copy.write_text(STATUS.read_text())
    monkeypatch.setattr(memory, "_STATUS", copy)
    expected = {}
    for line in copy.read_text().splitlines():
        name, _, rest = line.partition(":")
        if name.startswith("Vm") and rest.strip().endswith("kB"):
            expected[name] = int(rest.split()[0]) / 1024
    assert memory._status_mb() == expected and {"VmRSS", "VmHWM"} <= set(expected)
    assert "RssAnon" in copy.read_text()  # a kB line that is not a Vm size: left out
    monkeypatch.setattr(memory, "_STATUS", tmp_path / "gone")
    assert memory._status_mb() == {}


def test_the_peak_is_reset_where_the_kernel_lets_it(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert memory.reset_peak() is True
    monkeypatch.setattr(memory, "_CLEAR_REFS", tmp_path)  # a folder: not writable as a file
    assert memory.reset_peak() is False


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, sizes: dict[str, float],
         resets: bool) -> dict[str, dict[str, str]]:
    monkeypatch.setattr(memory, "_status_mb", lambda: dict(sizes))
    monkeypatch.setattr(memory, "reset_peak", lambda: resets)
    pytester.makepyfile(test_flat=FLAT)
    # what the controller is handed on each teardown report, beside what the sidecar keeps
    pytester.makeconftest("""
import json
def pytest_runtest_logreport(report):
    if report.when == "teardown":
        with open("handed.jsonl", "a") as out:
            out.write(json.dumps({k: getattr(report, k, None) for k in
                                  ("harness_rss_mb", "harness_peak_mb", "harness_growth_mb",
                                   "harness_start_mb")}) + "\\n")
""")
    partial = pytester.path / "out.partial.jsonl"
    result = pytester.runpytest(f"--harness-partial={partial}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    records = [json.loads(line) for line in partial.read_text().splitlines()]
    return {r["nodeid"]: r["properties"] for r in records}


def test_a_peak_is_recorded_where_its_file_rose_and_the_growth_to_a_tenth(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    props = _run(pytester, monkeypatch, {"VmHWM": 150.1234, "VmRSS": 90.0}, resets=True)
    # the same peak after each test: the first rose from nothing, the others only tie
    assert [p.get("peak_rss_mb") for p in props.values()] == ["150.1", None, None]
    assert all(p.get("rss_growth_mb") == "60.1" for p in props.values())


def test_no_growth_where_the_peak_could_not_be_reset(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the reset the peak is the process's since it started: not the test's."""
    props = _run(pytester, monkeypatch, {"VmHWM": 150.0, "VmRSS": 90.0}, resets=False)
    assert [p.get("peak_rss_mb") for p in props.values()] == ["150.0", None, None]
    assert not any("rss_growth_mb" in p for p in props.values())


def test_a_growth_under_ten_mb_is_not_recorded(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    props = _run(pytester, monkeypatch, {"VmHWM": 99.9, "VmRSS": 90.0}, resets=True)
    assert not any("rss_growth_mb" in p for p in props.values())


def test_a_process_that_shrank_during_a_test_grew_by_nothing(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the controller is handed, each to a tenth of a MB."""
    _run(pytester, monkeypatch, {"VmHWM": 95.04, "VmRSS": 95.63}, resets=True)
    handed = [json.loads(x) for x in (pytester.path / "handed.jsonl").read_text().splitlines()]
    assert handed == [{"harness_rss_mb": 95.6, "harness_peak_mb": 95.0,
                       "harness_growth_mb": 0.0, "harness_start_mb": 95.6}] * 3


def test_a_growth_of_ten_mb_is_recorded(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    props = _run(pytester, monkeypatch, {"VmHWM": 100.0, "VmRSS": 90.0}, resets=True)
    assert all(p.get("rss_growth_mb") == "10.0" for p in props.values())
