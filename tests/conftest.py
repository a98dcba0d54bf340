"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from report_history import History, make_history
from runs import Runs, make_runs  # tests/ is on sys.path: this conftest's folder

pytest_plugins = ("pytester",)

# Triton reads this once, when it is first imported: every test here runs Triton on the
# CPU, so set it before any test module (in any xdist worker) can import triton.
os.environ.setdefault("TRITON_INTERPRET", "1")

# -- the harness's own tests, not a suite under tests/data that `harness run` started ------
# (those load this conftest too, carry --platform, and keep the suite's own settings).


def _own_tests(config: pytest.Config) -> bool:
    return not config.getoption("--platform", default=None)


# Warnings are errors in the harness's own tests. Set here rather than in pyproject.toml:
# `harness run` runs the product suites (suites/) under the same pyproject, and their
# warnings (torch's) are findings for their report, not errors. Every exception is named
# with why it is there.
WARNING_EXCEPTIONS: tuple[tuple[str, str], ...] = (
    ("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning",
     "torch 2.13 warns from inside its own compile path (torch/jit/_script.py) when the "
     "fusion tests compile a graph with inductor; nothing of ours calls it"),
    # Only sockets already closed at the OS level: an open one left behind still fails.
    (r"ignore:unclosed <socket\.socket \[closed\]:ResourceWarning",
     "docker SDK 7: closing an exec stream (runners/container.py does) closes the socket's "
     "file but leaves the socket object, which warns when collected; no descriptor leaks"),
    (r"ignore:Exception ignored in. <socket\.socket \[closed\]"
     ":pytest.PytestUnraisableExceptionWarning",
     "the same docker SDK socket, when the collector finds it during another test"),
)

# Per-test timeouts (pytest-timeout) for the harness's own tests. The ini's `timeout` (900 s)
# stays the fallback of a product suite run straight with pytest (`harness run` passes the
# matrix's). Here each test gets a limit by folder, on its body only (func_only): the session
# fixtures that make real runs once for everyone are bounded by their own subprocess
# timeouts rather than charged to whichever test asks first. A test that is long on purpose
# says so with @pytest.mark.timeout(N) (fixtures included, as pytest-timeout's default).
DEFAULT_TIMEOUT_S = 300
FOLDER_TIMEOUTS_S = {"unit": 60, "kernels": 60}
# tests/unit stays quick (under a minute on 2 cores): what starts `harness run` in a
# subprocess, or asks for the session fixtures that do, lives in tests/integration.
SLOW_FIXTURES = frozenset({"real_runs", "nightly_history"})


# Under xdist (README: `-n 2`), whole files to a worker, the longest first: a file's
# module fixtures (a nightly day, two CI agents, a lane's runs) are made once, not once in
# each worker that gets one of its tests, and the long files start while the other worker
# has the short ones to take, so the two end together. (`load`, xdist's default, hands out
# tests in collection order without taking back what it queued: the last long file ran
# alone, the other worker idle, for up to 8 minutes.) tests/file_seconds.json: each file's
# seconds in a full run (scripts/test_file_seconds.py writes it from the run's JUnit); a
# file it does not name counts as NEW_FILE_S. Not in pyproject's addopts: `harness run`
# runs the product suites under the same pyproject, and their schedule is the plugin's.
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")
NEW_FILE_S = 20.0


def pytest_configure(config: pytest.Config) -> None:
    if not _own_tests(config):
        return
    config.addinivalue_line("filterwarnings", "error")
    for spec, _why in WARNING_EXCEPTIONS:
        config.addinivalue_line("filterwarnings", spec)
    if getattr(config.option, "dist", "no") == "load" and not hasattr(config, "workerinput"):
        config.option.dist = "loadfile"
        config.option.loadscopereorder = False  # our order, not the files' test counts


def _longest_files_first(items: list[pytest.Item]) -> None:
    """Sort ``items`` by their file's recorded seconds, longest first; a file's tests stay
    together and in their order, and files of equal weight keep the collection's order."""
    seconds = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.is_file() else {}
    first: dict[str, int] = {}
    for at, item in enumerate(items):
        first.setdefault(item.nodeid.split("::")[0], at)

    def weight(item: pytest.Item) -> tuple[float, int]:
        file = item.nodeid.split("::")[0]
        return -float(seconds.get(file, NEW_FILE_S)), first[file]

    items.sort(key=weight)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _own_tests(config):
        return
    _longest_files_first(items)
    tests_dir = Path(__file__).parent
    for item in items:
        try:
            folder = item.path.relative_to(tests_dir).parts[0]
        except ValueError:
            continue
        slow = SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
        if folder == "unit" and slow:
            raise pytest.UsageError(f"{item.nodeid} asks for {', '.join(sorted(slow))}, "
                                    "which make real runs: it belongs in tests/integration")
        if item.get_closest_marker("timeout") is not None:
            continue
        limit = FOLDER_TIMEOUTS_S.get(folder, DEFAULT_TIMEOUT_S)
        item.add_marker(pytest.mark.timeout(limit, func_only=True))


# -- isolation: no test writes outside its tmp dirs ----------------------------------------
# Each session (each xdist worker) gets its own home: the harness cache (~/.cache/harness,
# from the matrices' caches.root), XDG caches and configs, the download cache and the
# history database all land under the session's tmp folder. A test that means to use the
# real, shared cache (matrix venvs built once per pins and reused, minutes each) asks for
# the `shared_cache` fixture.
REAL_HOME = Path.home()
_CACHE_ENV = ("HOME", "XDG_CACHE_HOME", "HARNESS_DOWNLOAD_CACHE")
REAL_CACHE_ENV = {name: os.environ.get(name) for name in _CACHE_ENV}


@pytest.fixture(scope="session", autouse=True)
def _isolated_home(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path | None]:
    if not _own_tests(request.config):
        yield None
        return
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        patch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
        patch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
        patch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
        patch.setenv("HARNESS_HISTORY", str(home / "history.sqlite"))
        patch.delenv("HARNESS_DOWNLOAD_CACHE", raising=False)  # under the new home
        yield home


# Set by libraries themselves, not by a test: pytest's own; inductor writes what it picked
# into the environment for its compile workers (the cache folder on its first compile,
# _TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR, ...), and so may Triton.
LIBRARY_SET_ENV = frozenset({"PYTEST_CURRENT_TEST"})
LIBRARY_SET_PREFIXES = ("TORCHINDUCTOR_", "_TORCHINDUCTOR_", "TRITON_")


@pytest.fixture(autouse=True)
def _environment_kept(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test leaves the process environment as it found it (monkeypatch gives back what it
    set): a variable left behind (HARNESS_ROOT from an in-process ``cli.main(["--root",
    ...])``) would steer every later ``harness run`` of this xdist worker. Put back, and
    the test that left it fails."""
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    changed = sorted(k for k in before.keys() | after.keys()
                     if before.get(k) != after.get(k) and k not in LIBRARY_SET_ENV
                     and not (k not in before and k.startswith(LIBRARY_SET_PREFIXES)))
    if not changed or not _own_tests(request.config):
        return
    for key in changed:
        if key in before:
            os.environ[key] = before[key]
        else:
            del os.environ[key]
    pytest.fail(f"{request.node.nodeid} left the environment changed: {', '.join(changed)}",
                pytrace=False)


@pytest.fixture(scope="module")
def shared_cache() -> Iterator[Path]:
    """The real home and its caches, for this test module (and the module fixtures that ask
    for it): for tests that reuse what is costly to build, the matrix venvs under
    ~/.cache/harness/venvs. The history database stays the session's. Yields the real
    harness cache root."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in REAL_CACHE_ENV.items():
            if value is None:
                patch.delenv(name, raising=False)
            else:
                patch.setenv(name, value)
        yield REAL_HOME / ".cache" / "harness"


def _once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Any]) -> Any:
    """Make a session's shared data once for all xdist workers (the first makes it, the
    others wait and reuse it); ``make`` returns something with ``as_dict``."""
    # Imported here: suites under tests/data (run in a matrix venv or an image without
    # filelock) load this conftest too.
    from filelock import FileLock

    base = factory.getbasetemp()
    # Under xdist the session's folder is the parent of each worker's; without it the
    # parent is shared by every session, so stay in this session's own folder.
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with FileLock(str(shared / f"{name}.lock")):
        folder = shared / name
        index = folder / "index.json"
        if not index.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            index.write_text(json.dumps(make(folder).as_dict()))
        return json.loads(index.read_text())


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Run folders written by real ``harness run`` runs (see tests/runs.py). Read-only:
    a test that changes files works on ``runs.copy_runs``."""
    return Runs.from_dict(_once(tmp_path_factory, "real-runs", make_runs))


@pytest.fixture(scope="session")
def nightly_history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """Seven lanes over three nights, every run folder written by ``harness run``
    (tests/report_history.py), for the report and browser tests. Read-only."""
    return History.from_dict(_once(tmp_path_factory, "nightly-history", make_history))
