"""Per-platform expectation files for the fusion suite, and the ``expectations`` fixture.

A file ``<suite>/expectations/<platform>.yaml`` (``<platform>-emulated.yaml`` under
``--emulate``: counts on the CPU differ from the device's) holds, per case, the matched
count of each pass (or its "not applicable: ..." reason), the ops left unfused, and
inductor's generated-kernel count. ``check`` compares and fails with one line per count
that moved, naming the pass, both counts and the torch version. Under
``--update-expectations`` it records instead, and at the end of the session rewrites
the file for that platform and prints the diff for review.

Under xdist each worker holds only its own tests' counts: ``write`` takes a lock on the
file, re-reads it and merges, so the workers' updates add up instead of the last one
winning.
"""

from __future__ import annotations

import difflib
import fcntl
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from harness.errors import ConfigError
from harness.matrix.lane_data import KINDS, LaneDataMissing, LaneFiles, lane_files

if TYPE_CHECKING:
    from harness.plugin.profile import Profile

SCHEMA = 1
Counts = Mapping[str, Any]  # {"passes": {name: int|str}, "unfused": {op: int}, "kernels": int}


def load_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(f"invalid YAML: {error}", file=str(path), line=line) from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("cases", {}), dict):
        raise ConfigError("expected a mapping with a 'cases:' mapping", file=str(path))
    cases: dict[str, Any] = data.get("cases", {})
    for name, case in cases.items():
        if not isinstance(case, dict) or not {"passes", "unfused", "kernels"} <= set(case):
            raise ConfigError(
                "expected passes, unfused and kernels", file=str(path), key=f"cases.{name}"
            )
    return cases


def dump(platform: str, torch_version: str, cases: Mapping[str, Any]) -> str:
    header = (
        f"# Fusion expectations for {platform}, written with torch {torch_version}.\n"
        "# Review the diff; rewrite with: harness run --suite fusion --update-expectations\n"
    )
    body = {
        "schema": SCHEMA,
        "platform": platform,
        "torch": torch_version,
        "cases": {k: cases[k] for k in sorted(cases)},
    }
    return header + yaml.safe_dump(body, sort_keys=False, default_flow_style=False)


def differences(case: str, expected: Counts, found: Counts) -> list[str]:
    """One line per count that moved."""
    lines = []
    for group, label in (("passes", "pass"), ("unfused", "unfused op")):
        exp, got = dict(expected.get(group, {})), dict(found.get(group, {}))
        for name in sorted(set(exp) | set(got)):
            if exp.get(name) != got.get(name):
                lines.append(
                    f"{case}: {label} {name}: expected {exp.get(name, '(none)')}, "
                    f"found {got.get(name, '(none)')}"
                )
    if expected.get("kernels") != found.get("kernels"):
        lines.append(
            f"{case}: inductor kernels: expected {expected.get('kernels')}, "
            f"found {found.get('kernels')}"
        )
    return lines


class ExpectationStore:
    """One per (suite folder, platform) per session; collects updates until the end."""

    def __init__(self, files: LaneFiles, platform: str, update: bool,
                 torch_version: str) -> None:
        self.path = files.read  # the lane's own, or the parent's it inherits
        self.own = files.own  # where it records
        self.platform = platform
        self.update = update
        self.torch_version = torch_version
        self.cases = load_file(self.path)
        self.found: dict[str, Any] = {}

    def check(
        self, case: str, found: Counts, record_property: Callable[[str, object], None] | None = None
    ) -> None:
        found = {
            "passes": dict(found["passes"]),
            "unfused": dict(found["unfused"]),
            "kernels": int(found["kernels"]),
        }
        expected = self.cases.get(case)
        if record_property is not None:
            for name, value in found["passes"].items():
                want = expected["passes"].get(name) if expected else None
                record_property(f"fusion.{name}.expected", "" if want is None else want)
                record_property(f"fusion.{name}.found", value)
            record_property("fusion.kernels.expected", expected["kernels"] if expected else "")
            record_property("fusion.kernels.found", found["kernels"])
        if self.update:
            self.found[case] = found
            return
        if expected is None:
            raise LaneDataMissing(
                f"{case}: {KINDS['expectations'][1]} {self.path} (torch "
                f"{self.torch_version}); run with --update-expectations"
            )
        lines = differences(case, expected, found)
        if lines:
            raise AssertionError(
                "\n".join(
                    [
                        *lines,
                        f"(torch {self.torch_version}, expectations {self.path}; "
                        "if intended, rerun with --update-expectations and review the diff)",
                    ]
                )
            )

    def write(self) -> str:
        """Rewrite the file with the recorded cases; returns the unified diff."""
        if not self.found:
            return ""
        path = self.own
        path.parent.mkdir(parents=True, exist_ok=True)
        # Lock the folder (no lock file left behind in the suite).
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            fcntl.flock(folder, fcntl.LOCK_EX)
            old = path.read_text(encoding="utf-8") if path.is_file() else ""
            # Re-read: another xdist worker may have written its cases since we loaded.
            current = load_file(path)
            new = dump(self.platform, self.torch_version, {**current, **self.found})
            if new != old:
                path.write_text(new, encoding="utf-8")
        finally:
            os.close(folder)  # releases the lock
        if new == old:
            return ""
        return "".join(
            difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(path), str(path))
        )


_STORES = pytest.StashKey[dict[Path, ExpectationStore]]()


@pytest.fixture
def expectations(request: pytest.FixtureRequest, platform: Profile) -> ExpectationStore:
    """The expectation store of the requesting test's suite folder and this platform."""
    import torch

    config = request.config
    stores = config.stash.setdefault(_STORES, {})
    files = lane_files(request.path.parent, "expectations", platform.matrix,
                       bool(platform.emulate))
    path = files.own
    if path not in stores:
        store = ExpectationStore(
            files,
            platform.name,
            bool(config.getoption("--update-expectations")),
            str(torch.__version__),
        )
        stores[path] = store
        if store.update:
            config.add_cleanup(lambda: _finish(config, store))
    return stores[path]


def _finish(config: pytest.Config, store: ExpectationStore) -> None:
    diff = store.write()
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    text = diff or f"{store.own}: no change\n"
    if reporter is not None:
        reporter.write_line("")
        for line in text.splitlines():
            reporter.write_line(line)
    else:
        print(text)
