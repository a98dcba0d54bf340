"""The one shape every runner has: started for a run, it runs that run's invocations one
suite after another and reports each outcome as it comes, then stops.

``LocalRunner`` (runners/local.py) runs them as subprocesses of this host,
``DockerRunner`` (runners/docker.py) with ``exec`` in the platform's container. ``harness
run`` picks one per run (run/request.py ``pick_runner``) and drives either the same way, so
both print the same progress lines and write each outcome to the manifest as it comes.
"""

from __future__ import annotations

import contextlib
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Self, TextIO

from harness.results.facts import DeviceFingerprint
from harness.results.manifest_write import ManifestWriter
from harness.results.outcome import Status, SuiteOutcome
from harness.runners.invocation import Invocation

OnStart = Callable[[int, Invocation], None]
OnOutcome = Callable[[SuiteOutcome], None]

# After these a run stops: the person asked, or nothing more can be written.
_LAST = (Status.INTERRUPTED, Status.WRITE_FAILED)


class Runner(ABC):
    """Where a run's suites execute. ``start`` (idempotent) prepares the place and probes
    the device; ``stop`` (idempotent, also when ``start`` failed half-way) frees it."""

    kind: ClassVar[str]  # "local" | "docker": the manifest's ``runner``
    # The suites run in a container: this host needs Docker, not the matrix's environment.
    in_container: ClassVar[bool]
    # The interpreter the runner brings (the image's); None: the run chooses one here.
    python: ClassVar[str | None] = None

    def __init__(self, *, echo: TextIO | None = sys.stdout) -> None:
        self.echo = echo  # where the suites' prefixed lines go (None: only their logs)
        self.invocations: list[Invocation] = []
        self.fingerprint: DeviceFingerprint | None = None  # the device probe's, once started
        self._started = False

    @abstractmethod
    def preflight(self) -> None:
        """What can be checked before the run's environment is built (InfraError when this
        host cannot run the matrix)."""

    def start(self, run_dir: Path, invocations: Sequence[Invocation], *,
              env: Mapping[str, str] | None = None,
              manifest: ManifestWriter | None = None) -> None:
        """Ready to run ``invocations`` of the run in ``run_dir``; ``env``: the harness's
        settings for every suite (None: the runner's defaults); the device fingerprint
        (and what else the runner decides) goes into ``manifest``."""
        self.invocations = list(invocations)
        self._started = True
        self._start(run_dir, dict(env) if env is not None else None, manifest)
        if manifest is not None and self.fingerprint is not None:
            manifest.set_device_fingerprint(self.fingerprint)

    @abstractmethod
    def stop(self) -> None:
        """Free what ``start`` took; nothing when it took nothing."""

    @contextlib.contextmanager
    def started(self, run_dir: Path, invocations: Sequence[Invocation], *,
                env: Mapping[str, str] | None = None,
                manifest: ManifestWriter | None = None) -> Iterator[Self]:
        """``start``, then ``stop`` whatever happens."""
        try:
            self.start(run_dir, invocations, env=env, manifest=manifest)
            yield self
        finally:
            self.stop()

    def run(self, *, on_start: OnStart | None = None,
            on_outcome: OnOutcome | None = None) -> list[SuiteOutcome]:
        """Run the started invocations in order, calling ``on_start(index, invocation)``
        before each and ``on_outcome(outcome)`` after each; stop after an interrupt or a
        write that failed for good."""
        if not self._started:
            raise RuntimeError(f"the {self.kind} runner runs only once started")
        outcomes = []
        for index, inv in enumerate(self.invocations):
            if on_start is not None:
                on_start(index, inv)
            inv.junit.parent.mkdir(parents=True, exist_ok=True)
            outcome = self.run_one(inv)
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
            if outcome.status in _LAST:
                break
        return outcomes

    @abstractmethod
    def _start(self, run_dir: Path, env: dict[str, str] | None,
               manifest: ManifestWriter | None) -> None:
        """The runner's own start; sets ``fingerprint`` where it probes a device."""

    @abstractmethod
    def run_one(self, inv: Invocation) -> SuiteOutcome:
        """One suite's process, classified (JUnit is the truth, runners/local.py outcome_of)."""

    @abstractmethod
    def command_line(self, inv: Invocation, run_dir: Path, env: Mapping[str, str]) -> str:
        """The command a developer can paste to run ``inv`` by hand (``--dry-run``)."""
