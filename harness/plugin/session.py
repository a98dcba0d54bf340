"""What the plugin does once a platform is given: markers, known failures, properties."""

from __future__ import annotations

import fnmatch
import inspect
import os
import random
import sys
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pluggy import Result

from harness.errors import UsageError
from harness.matrix.known_failures import Entry, entries_for, glob_to_regex, match
from harness.platform.host import cpu_flags, kernel_cpu_flags
from harness.plugin.failure_expect import mismatch
from harness.plugin.profile import Profile
from harness.results.junit_read import NODEID_PROPERTY
from harness.results.sidecar import RELEASE_MISMATCH, release_mismatch

TIERS = ("smoke", "full")


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    bitwise: bool
    source: str


def make_tolerance_lookup(profile: Profile) -> Callable[..., Tolerance]:
    def lookup(dtype: object, op: str | None = None) -> Tolerance:
        name = str(dtype).removeprefix("torch.")
        tol, source = profile.matrix.tolerances.lookup(name, op)
        return Tolerance(tol.atol, tol.rtol, tol.bitwise, f"{profile.name}/{source}")

    return lookup


class HarnessSession:
    """Registered as a plugin object when ``--platform`` is given."""

    def __init__(self, config: pytest.Config, profile: Profile) -> None:
        self.config = config
        self.profile = profile
        self.tier = os.environ.get("HARNESS_TIER", "full")
        if self.tier not in TIERS:
            raise pytest.UsageError(f"HARNESS_TIER={self.tier!r}: expected one of {TIERS}")
        # The report reads the same entries the same way (one matcher, one lane rule).
        # An entry conditioned on the host (CPU flags) applies only where it holds here.
        self.entries: list[Entry] = entries_for(
            profile.matrix, emulate=profile.emulate,
            host_flags=kernel_cpu_flags(cpu_flags(), os.environ))
        self.collected_files: set[str] = set()
        self.helpers: list[str] = []  # imported test_* helpers left uncollected
        self.expired = [e for e in self.entries if e.expired]
        # `skip` entries naming a whole file: pytest never imports it (pytest_make_collect_report)
        self.whole_files = [e for e in self.entries if e.action == "skip" and not e.expired
                            and "::" not in e.pattern]
        threads = os.environ.get("HARNESS_TORCH_THREADS")
        if threads:
            _set_torch_threads(int(threads))
        if profile.device == "cpu":
            # Triton kernels run on the CPU through the interpreter; it must be set
            # before triton is first imported.
            os.environ.setdefault("TRITON_INTERPRET", "1")

    # -- reporting -----------------------------------------------------------------

    def pytest_report_header(self) -> str:
        how = " (emulated on the CPU)" if self.profile.emulate else ""
        return (
            f"harness: platform {self.profile.name}{how}, device {self.profile.device}, "
            f"matrix {self.profile.matrix.hash[:12]}, tier {self.tier}"
        )

    def suite_properties(self) -> dict[str, str]:
        props = {
            "matrix": self.profile.name,
            "matrix_hash": self.profile.matrix.hash,
            "matrix_file": self.profile.matrix.file,  # a loose JUnit file finds its matrix
            "emulate": str(self.profile.emulate).lower(),
            "seed": str(self.config.getoption("--harness-seed")),
        }
        # What the run knows beyond this profile (run id, git, image, device) lives in
        # the run folder's manifest, not here: a JUnit file is read with its folder.
        return props

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput"):
            return
        from _pytest.junitxml import xml_key

        xml = self.config.stash.get(xml_key, None)
        if xml is not None:
            for key, value in self.suite_properties().items():
                xml.add_global_property(key, value)

    # -- collection ------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makeitem(
        self, collector: pytest.Collector, name: str, obj: object
    ) -> list[pytest.Item] | None:
        """A ``test_*`` function a test module imports from a helper module (one pytest
        would not collect itself) is that module's helper, not a test of this module:
        engines' trees have ``test_helper(model)`` in shared utilities."""
        if not isinstance(collector, pytest.Module) or not inspect.isfunction(obj):
            return None
        home = getattr(obj, "__module__", None)
        if not home or home == collector.obj.__name__ or not collector.istestfunction(obj, name):
            return None
        file = getattr(sys.modules.get(home), "__file__", None)
        if not file or _is_test_file(Path(file).name, self.config.getini("python_files")):
            return None
        self.helpers.append(f"{collector.nodeid}::{name} (from {home})")
        return []

    @pytest.hookimpl(tryfirst=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> pytest.CollectReport | None:
        """A ``skip`` known failure whose id names a whole file (no ``::``): pytest never
        imports the file, and JUnit records a collection skip with the entry's reason. For
        a file that dies while pytest imports it (a SIGILL from a kernel library built for
        another CPU), which no mark on its tests can reach; on a host where the entry does
        not hold, the file runs."""
        if not self.whole_files or not isinstance(collector, pytest.Module):
            return None
        entry = match(self.whole_files, collector.nodeid)
        if entry is None:
            return None
        why = f"Skipped: known failure: {entry.describe()}"
        return pytest.CollectReport(collector.nodeid, "skipped",
                                    (str(collector.path), 0, why), [])

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """A test that takes ``platform_dtype`` runs once per dtype the matrix declares."""
        if "platform_dtype" in metafunc.fixturenames:
            metafunc.parametrize("platform_dtype", list(self.profile.dtypes))

    @pytest.hookimpl(wrapper=True)
    def pytest_collectreport(self, report: pytest.CollectReport
                             ) -> Generator[None, object, object]:
        """A module that failed to import is an error case in JUnit (pytest writes it):
        give it the module's node id, as a test's case has its own (in the partial file,
        the JUnit sidecar, when there is one: xunit2 has no per-case properties)."""
        across = self.config.getoption("--harness-release-mismatch")
        if report.failed and across:  # before pytest's JUnit writer reads it
            report.longrepr = f"{RELEASE_MISMATCH}: {across}\n{report.longreprtext}"
        result = yield
        sidecar = self.config.getoption("--harness-partial")
        if not report.failed or hasattr(self.config, "workerinput"):
            return result
        from _pytest.junitxml import xml_key

        xml = self.config.stash.get(xml_key, None)
        if xml is None:
            return result
        reporter = xml.node_reporter(report)
        if not sidecar:
            reporter.add_property(NODEID_PROPERTY, report.nodeid)
        for node in reporter.nodes if across else ():  # its message, as JUnit readers show it
            if node.tag == "error":
                node.set("message", release_mismatch(node.get("message", ""), across))
        return result

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        deselected = []
        kept = []
        for item in items:
            tier = item.get_closest_marker("tier")
            item_tier = tier.args[0] if tier and tier.args else "full"
            if item_tier not in TIERS:
                raise pytest.UsageError(f"{item.nodeid}: unknown tier {item_tier!r}")
            if self.tier == "smoke" and item_tier != "smoke":
                deselected.append(item)
                continue
            kept.append(item)
            # pytest's own id, as it reported it: history keys and repro ids read this,
            # never a rebuild from JUnit's classname / file (wrong for decorated tests).
            item.user_properties.append((NODEID_PROPERTY, item.nodeid))
            self.collected_files.add(item.nodeid.partition("::")[0])
            self._apply_requires(item)
            self._apply_known_failure(item)
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = kept

    def _apply_requires(self, item: pytest.Item) -> None:
        needed = [c for m in item.iter_markers("requires") for c in m.args]
        for cap in needed:
            if not self.profile.known(cap):
                try:
                    self.profile.has(cap)
                except UsageError as error:
                    raise pytest.UsageError(f"{item.nodeid}: requires: {error}") from None
        if needed:
            item.user_properties.append(("requires", ",".join(needed)))
        for cap in needed:
            reason = self.profile.why_missing(cap)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
                return

    def _apply_known_failure(self, item: pytest.Item) -> None:
        entry = match(self.entries, item.nodeid)
        if entry is None:
            return
        item.user_properties.append(("known_failure", entry.action))
        if entry.expect:
            item.stash[_EXPECT] = entry
        if entry.expired:
            item.stash[_EXPIRED] = entry
        elif entry.action == "skip":
            item.add_marker(pytest.mark.skip(reason=f"known failure: {entry.describe()}"))
        elif entry.action == "xfail":
            item.add_marker(pytest.mark.xfail(strict=True, reason=entry.describe()))
        else:  # quarantine: runs, is recorded, never fails the run
            item.add_marker(
                pytest.mark.xfail(strict=False, reason=f"quarantined: {entry.describe()}")
            )

    # -- running -----------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        entry = item.stash.get(_EXPIRED, None)
        if entry is not None:
            pytest.fail(
                f"known_failures entry expired on {entry.expires}: {entry.describe()}; "
                "renew it or remove it",
                pytrace=False,
            )
        seed = int(self.config.getoption("--harness-seed"))
        random.seed(seed)
        try:
            import numpy

            numpy.random.seed(seed)
        except ImportError:
            pass
        try:
            import torch

            torch.manual_seed(seed)
        except ImportError:
            pass

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, Result[pytest.TestReport], None]:
        # Outermost, so the xfail handling has already turned the failure into an xfail.
        # Every phase: pytest turns an error in a fixture's setup or teardown into an
        # xfail of a known failure too, and it must fit the entry's expect as the call's does.
        outcome = yield
        entry = item.stash.get(_EXPECT, None)
        if entry is None or call.excinfo is None:
            return
        report = outcome.get_result()
        if not hasattr(report, "wasxfail"):
            return  # it failed anyway (strict xfail that passed, or not turned into one)
        exc = call.excinfo.value
        types = [cls.__name__ for cls in type(exc).__mro__]
        why = mismatch(entry.expect, types, str(exc), item.user_properties)
        if why is None:
            return
        del report.wasxfail
        report.outcome = "failed"
        phase = "" if call.when == "call" else f" (in {call.when})"
        report.longrepr = (
            f"known failure {entry.pattern} [{entry.where}] expects another failure: {why}\n"
            f"the failure{phase}: {type(exc).__name__}: {exc}"
        )

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        tr = terminalreporter
        for entry in self.expired:
            tr.write_line(
                f"EXPIRED KNOWN FAILURE ({entry.expires}): {entry.pattern}: {entry.describe()}",
                red=True,
                bold=True,
            )
        if hasattr(self.config, "workerinput"):
            return
        if self.helpers:
            tr.write_line(
                f"harness: not collected: {len(self.helpers)} test_* function(s) imported from "
                f"helper modules, e.g. {self.helpers[0]}"
            )
        # Only entries for the files this session collected (or, for ids written against
        # another rootdir, the same file names): another suite's entries are its own.
        unmatched = [e for e in self.entries if not e.matched and self._concerns_us(e)]
        collected_all = not self.config.getoption("keyword") and not self.config.getoption(
            "markexpr"
        )
        # Under xdist the workers collect, so the controller cannot tell what matched.
        distributed = bool(getattr(self.config.option, "numprocesses", None))
        if unmatched and collected_all and not distributed:
            for entry in unmatched:
                tr.write_line(
                    f"harness: known failure matched no test here (rootdir "
                    f"{self.config.rootpath}): {entry.pattern} [{entry.where}]"
                )

    def _concerns_us(self, entry: Entry) -> bool:
        by_path = glob_to_regex(entry.file_part)
        by_name = glob_to_regex(entry.file_part.rpartition("/")[2])
        names = {f.rpartition("/")[2] for f in self.collected_files}
        return any(by_path.match(f) for f in self.collected_files) or any(
            by_name.match(n) for n in names
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # tryfirst: before the JUnit writer, so the suite properties carry these.
        if not hasattr(self.config, "workerinput"):
            self._add_runtime_properties()
        if self.expired and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _add_runtime_properties(self) -> None:
        from _pytest.junitxml import xml_key

        xml = self.config.stash.get(xml_key, None)
        torch = sys.modules.get("torch")
        if xml is None or torch is None:
            return
        xml.add_global_property("torch_version", str(torch.__version__))


_EXPIRED = pytest.StashKey[Entry]()
_EXPECT = pytest.StashKey[Entry]()


def _is_test_file(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)


def _set_torch_threads(count: int) -> None:
    """Each xdist worker gets its share of the CPU budget (the harness computed it)."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(count)
