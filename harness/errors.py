"""One exception class per failure kind, each carrying the exit code the CLI returns.

Only ``harness.cli.main`` catches these; it prints ``str(error)`` as one line.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """harness's exit codes, one place: the exceptions below carry them, the run's status
    (run/finish.py) and each cause's meaning (results/cause.py) name them, bisect reads a
    step's from here (docs/contracts.md)."""

    OK = 0
    FAILED = 1  # a test failed (a finding), or no test ran
    USAGE = 2  # the command line or an input file is wrong
    INFRA = 3  # infrastructure: CI retries it
    CRASHED = 4  # a test process killed itself by a signal: a finding, never retried
    INTERRUPTED = 130  # Ctrl-C (a CI cancel by SIGTERM / SIGHUP: 143 / 129)


class HarnessError(Exception):
    """Base class of every failure a user should see as one clean line."""

    exit_code: int = Exit.FAILED


class TestsFailed(HarnessError):
    """Tests ran and some failed (exit 1)."""

    __test__ = False  # not a pytest test class
    exit_code: int = Exit.FAILED


class TestProcessCrashed(HarnessError):
    """A test process killed itself by a signal (SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE:
    ``os.abort()``, a segfaulting kernel): a finding about the code under test, which a
    retry would repeat (exit 4; an infrastructure failure in the same run is exit 3)."""

    __test__ = False
    exit_code: int = Exit.CRASHED


class ConfigError(HarnessError):
    """A matrix, expectations file or other input is invalid (exit 2)."""

    exit_code: int = Exit.USAGE

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 key: str | None = None) -> None:
        self.file = file
        self.line = line
        self.key = key
        self.reason = message
        where = ""
        if file:
            where = f"{file}:{line}: " if line else f"{file}: "
        if key:
            where += f"{key}: "
        super().__init__(where + message)


class ConfigErrors(ConfigError):
    """Several configuration problems at once; printed one per line."""

    def __init__(self, errors: list[ConfigError]) -> None:
        self.errors = errors
        Exception.__init__(self, "\n".join(str(e) for e in errors))
        self.file = errors[0].file if errors else None
        self.line = errors[0].line if errors else None
        self.key = errors[0].key if errors else None
        self.reason = str(self)


class UsageError(HarnessError):
    """The command line is wrong (exit 2)."""

    exit_code: int = Exit.USAGE


class InfraError(HarnessError):
    """Infrastructure failed: image build, docker, probe, missing JUnit, timeout (exit 3)."""

    exit_code: int = Exit.INFRA


class HostUnavailable(InfraError):
    """This host is not the matrix's: its device is absent, or its probe refuses the CPU
    (exit 3; with ``harness run --skip-unavailable``, a run recorded as skipped)."""


class Interrupted(HarnessError):
    """Ctrl-C (exit 130), or a cancel by SIGTERM (143) or SIGHUP (129)."""

    exit_code: int = Exit.INTERRUPTED

    def __init__(self, message: str, *, exit_code: int = Exit.INTERRUPTED) -> None:
        super().__init__(message)
        self.exit_code = exit_code
