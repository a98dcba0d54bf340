"""Writing manifest.json: the run's record, rewritten atomically after every step (so a
crash or Ctrl-C still leaves an accurate record), its suites' outcomes made relative to
the run folder, and the CI build the run belongs to."""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from harness.results import layout
from harness.results.facts import DeviceFingerprint
from harness.results.manifest import (
    InfraFailure,
    RunRecord,
    UnmatchedKnownFailure,
    inside_run,
)
from harness.results.outcome import SuiteOutcome


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


# Where CI systems put the id of the build a job belongs to (all its jobs share it).
_BUILD_VARIABLES = ("HARNESS_BUILD", "BUILDKITE_BUILD_ID", "GITHUB_RUN_ID", "CI_PIPELINE_ID",
                    "BUILD_TAG")


def build_id(env: Mapping[str, str]) -> str | None:
    """The CI build of this job, so that the shards of one build are one night."""
    for name in _BUILD_VARIABLES:
        if env.get(name):
            attempt = env.get("GITHUB_RUN_ATTEMPT") if name == "GITHUB_RUN_ID" else None
            return env[name] + (f".{attempt}" if attempt else "")
    return None


class ManifestWriter:
    """Holds a run's record and rewrites manifest.json after every change."""

    def __init__(self, run_dir: Path, record: RunRecord,
                 mask: Callable[[str], str] = lambda text: text) -> None:
        self.run_dir = run_dir
        self.path = run_dir / layout.MANIFEST
        self.record = record
        self._mask = mask
        self.write()

    def write(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        try:  # a failed write (a full disk) leaves the last good manifest in place
            tmp.write_text(self._mask(self.record.to_json()), encoding="utf-8")
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)

    # One method per thing a step learns once the run has started, each typed as
    # RunRecord's field, so mypy checks every value the manifest is given.

    def set_device_fingerprint(self, fingerprint: DeviceFingerprint) -> None:
        """The device probe's fingerprint (the runner's, at start), or it with the kernel
        library the suites loaded (the finish step's)."""
        self.record.device_fingerprint = fingerprint
        self.write()

    def set_container(self, *, image: str, env: dict[str, str]) -> None:
        """The docker runner's image and the container's environment (secrets masked)."""
        self.record.image, self.record.container_env = image, env
        self.write()

    def set_torch(self, version: str) -> None:
        """The torch version the suites imported (their JUnit's ``torch_version``)."""
        self.record.torch = version
        self.write()

    def set_new_files(self, files: list[str]) -> None:
        """The files the suites left in the checkout."""
        self.record.new_files = files
        self.write()

    def set_unmatched_known_failures(self, found: list[UnmatchedKnownFailure]) -> None:
        self.record.unmatched_known_failures = found
        self.write()

    def add_outcome(self, outcome: SuiteOutcome) -> None:
        """Record a runner's SuiteOutcome (absolute paths made relative to the run)."""
        self.record.suites.append(suite_record(outcome, self.run_dir))
        self.write()

    def finish(self, *, status: str, exit_code: int, infra_error: InfraFailure | None) -> None:
        record = self.record
        record.status, record.exit_code, record.infra_error = status, exit_code, infra_error
        record.ended = now()
        self.write()


def suite_record(outcome: SuiteOutcome, run_dir: Path) -> SuiteOutcome:
    """The outcome as the manifest records it: paths relative to the run folder."""

    def rel(path: str | Path) -> str:
        if not path:
            return ""
        try:
            return Path(path).resolve().relative_to(run_dir.resolve()).as_posix()
        except ValueError:
            return inside_run(str(path))

    return replace(
        outcome,
        duration_s=round(float(outcome.duration_s), 3),
        junit=rel(outcome.junit),
        log=layout.log_rel(outcome.suite, outcome.shard),
        counts=replace(outcome.counts),
        log_tail=list(outcome.log_tail),
        skip_reasons=list(outcome.skip_reasons),
    )
