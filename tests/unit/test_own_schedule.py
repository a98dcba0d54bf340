"""How the harness's own tests are handed to xdist's workers (tests/conftest.py): whole
files, the longest first by tests/file_seconds.json, which scripts/test_file_seconds.py
writes from a real run's JUnit."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# a file tests/file_seconds.json does not name counts as NEW_FILE_S (20 s)
FILES = ["tests/unit/test_kernel_table.py", "tests/integration/test_nightly_day.py",
         "tests/unit/test_skips.py", "tests/unit/test_own_schedule.py"]


def _pytest(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=50, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_files_are_collected_longest_first_each_whole() -> None:
    seconds = json.loads((ROOT / "tests" / "file_seconds.json").read_text())
    assert all(f in seconds for f in FILES[:3])
    ids = [line for line in _pytest("--collect-only", "-q", *FILES).splitlines()
           if "::" in line]
    files = [i.split("::")[0] for i in ids]
    order = list(dict.fromkeys(files))
    expected = sorted(FILES, key=lambda f: -seconds.get(f, 20.0))
    assert order == expected and expected[0] == FILES[1]
    # each file's tests together, in the file's own order
    assert files == [f for f in order for _ in range(files.count(f))]
    alone = [line for line in _pytest("--collect-only", "-q", FILES[0]).splitlines()
             if "::" in line]
    assert [i for i in ids if i.startswith(FILES[0])] == alone and len(alone) > 1


def test_under_xdist_each_worker_takes_whole_files() -> None:
    out = _pytest("-n", "2", "-v", "tests/unit/test_kernel_table.py")
    assert "LoadFileScheduling" in out, out[-2000:]


def test_the_seconds_come_from_a_runs_junit_per_file(tmp_path: Path) -> None:
    junit = tmp_path / "run.xml"
    _pytest("tests/unit/test_skips.py", "tests/unit/test_cpuid.py", f"--junitxml={junit}")
    spec = importlib.util.spec_from_file_location("test_file_seconds",
                                                  ROOT / "scripts" / "test_file_seconds.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    found = script.file_seconds(junit)
    assert set(found) == {"tests/unit/test_skips.py", "tests/unit/test_cpuid.py"}
    assert list(found) == sorted(found, key=lambda f: -found[f])
    out = tmp_path / "seconds.json"
    assert script.main([str(junit), "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == found
    empty = tmp_path / "empty.xml"
    empty.write_text("<testsuites/>")
    assert script.main([str(empty), "--out", str(out)]) == 2
