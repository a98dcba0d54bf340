"""The pytest plugin loaded into every suite run (entry point ``pytest11: harness``).

Inert unless ``--platform`` is given, so it never changes an unrelated pytest run.
When active it registers a :class:`~harness.plugin.session.HarnessSession`, which holds
the profile and provides the markers' behaviour; the fixtures below read it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # torch and the session load only when a fixture runs
    import torch

    from harness.plugin.numerics import Comparison, Tolerances
    from harness.plugin.profile import Profile
    from harness.plugin.session import HarnessSession, Tolerance

# Change-based selection, shard selection and the same_process marker come with the
# plugin in every run.
pytest_plugins = ("harness.plugin.select", "harness.plugin.shard")

_SESSION_KEY = "harness_session"
_SESSION_STASH = pytest.StashKey["HarnessSession"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "hardware-portability harness")
    group.addoption(
        "--platform",
        default=None,
        metavar="NAME|PATH",
        help="run under this platform's matrix (a name, a YAML or a resolved JSON)",
    )
    group.addoption(
        "--emulate",
        action="store_true",
        default=False,
        help="run a GPU profile on the CPU; hardware-only capabilities skip",
    )
    group.addoption(
        "--harness-seed",
        type=int,
        default=0,
        metavar="N",
        help="seed for random, numpy and torch before every test",
    )
    group.addoption(
        "--update-expectations",
        action="store_true",
        default=False,
        help="rewrite the platform's expectation files instead of checking them",
    )
    group.addoption(
        "--harness-partial",
        default=os.environ.get("HARNESS_PARTIAL"),
        metavar="FILE",
        help="append each finished test (and its properties, which then stay out of "
        "JUnit) to this JSON-lines file",
    )
    group.addoption(
        "--harness-release-mismatch",
        default=None,
        metavar="WORDS",
        help="this suite's tests are from another release than the engine (harness run "
        "--across-releases): a module that fails to import is labelled so",
    )
    group.addoption(
        "--harness-memory-mb",
        type=float,
        default=None,
        metavar="MB",
        help="under xdist: the suite's whole memory budget; each worker is kept within its "
        "share of it, restarted between tests (plugin/memory.py)",
    )
    group.addoption(
        "--harness-test-memory",
        default=None,
        metavar="FILE",
        help="each test's memory need from the history (the run's test-memory.json): a "
        "worker is restarted before a test that would take it over its share",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requires(*caps): needs these platform capabilities")
    config.addinivalue_line("markers", "tier(name): suite tier (smoke, full)")
    from harness.plugin.knockout import register as register_knock_out

    register_knock_out(config)  # without HARNESS_KNOCK_OUT, nothing
    partial = config.getoption("--harness-partial")
    if partial:
        from harness.plugin.partial import XUNIT2_WARNING, PartialResults
        from harness.results.layout import progress_for_partial

        config.addinivalue_line("filterwarnings", XUNIT2_WARNING)
        if not hasattr(config, "workerinput"):
            recorder = PartialResults(config, Path(partial), progress_for_partial(Path(partial)))
            config.pluginmanager.register(recorder, "harness-partial")
        _register_measures(config)
    spec = config.getoption("--platform")
    if not spec:
        return
    from harness.errors import HarnessError
    from harness.plugin.profile import load_profile
    from harness.plugin.session import HarnessSession

    try:
        profile = load_profile(spec, emulate=config.getoption("--emulate"))
    except HarnessError as error:
        raise pytest.UsageError(f"--platform {spec}: {error}") from None
    # A module that fails to import is an error of that module (a test case in JUnit
    # with its traceback); the other modules still run and pytest exits 1, not 2.
    config.option.continue_on_collection_errors = True
    session = HarnessSession(config, profile)
    config.stash[_stash_key()] = session
    config.pluginmanager.register(session, _SESSION_KEY)


def _register_measures(config: pytest.Config) -> None:
    """Each test's peak memory and op record where tests run; the worker budget in xdist's
    controller."""
    from harness.plugin.memory import TestMemory, WorkerBudget
    from harness.plugin.memory_rules import read_needs
    from harness.plugin.ops import OpRecord, enabled

    config.pluginmanager.register(TestMemory(), "harness-memory")
    if enabled():
        config.pluginmanager.register(OpRecord(config), "harness-op-record")
    total = config.getoption("--harness-memory-mb")
    distributed = bool(getattr(config.option, "numprocesses", None))
    if total and distributed and not hasattr(config, "workerinput"):
        needs = read_needs(config.getoption("--harness-test-memory"),
                           str(config.getini("junit_suite_name")))
        config.pluginmanager.register(WorkerBudget(config, total, needs),
                                      "harness-worker-budget")


def _stash_key() -> pytest.StashKey[HarnessSession]:
    return _SESSION_STASH


def _session(request: pytest.FixtureRequest) -> HarnessSession:
    session = request.config.stash.get(_stash_key(), None)
    if session is None:
        pytest.skip("no platform given: run with --platform NAME (or through `harness run`)")
    return session


@pytest.fixture(scope="session")
def platform(request: pytest.FixtureRequest) -> Profile:
    """The resolved platform profile."""
    return _session(request).profile


@pytest.fixture(scope="session")
def device(platform: Profile) -> torch.device:
    import torch

    return torch.device(platform.device)


@pytest.fixture(scope="session")
def fp8_dtype(platform: Profile) -> torch.dtype:
    import torch

    name = platform.matrix.fp8.e4m3
    if not name:
        pytest.skip(f"{platform.name} has no fp8 format")
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        pytest.skip(f"{platform.name}: torch {torch.__version__} has no {name}")
    return dtype


@pytest.fixture(scope="session")
def tolerance(platform: Profile) -> Callable[..., Tolerance]:
    from harness.plugin.session import make_tolerance_lookup

    return make_tolerance_lookup(platform)


@pytest.fixture(scope="session")
def kernel_priority(platform: Profile) -> Callable[[str], tuple[str, ...]]:
    def lookup(op: str) -> tuple[str, ...]:
        kernels = platform.matrix.kernels
        if op not in kernels:
            raise pytest.UsageError(f"{platform.name}: no kernels entry for op {op!r}")
        return tuple(kernels[op])

    return lookup


@pytest.fixture(scope="session")
def seed(request: pytest.FixtureRequest) -> int:
    return int(request.config.getoption("--harness-seed"))


@pytest.fixture
def record_numerics(record_property: Callable[[str, object], None]) -> Callable[..., Comparison]:
    """``record_numerics(actual, expected, tol, op=..., provider=..., dtype=...)``
    (``nonfinite_ok=True`` where the op's contract allows NaN and Inf)."""
    from harness.plugin.numerics import record_numerics as _record

    def check(actual: torch.Tensor, expected: torch.Tensor, tol: Tolerances, *,
              nonfinite_ok: bool = False, **props: object) -> Comparison:
        return _record(actual, expected, tol, record_property, nonfinite_ok=nonfinite_ok,
                       **props)

    return check
