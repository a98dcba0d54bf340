"""The one known-failure matcher: a matrix's known_failures against test ids.

The pytest plugin applies it to collected tests; the nightly report uses the same
entries to find known failures that now pass.

Patterns are globs over normalised test ids (``*`` any text, ``?`` one character;
brackets are literal, as in test ids), so one entry covers
``[cuda:0-torch.bfloat16]`` and ``[cuda-bfloat16]`` alike. ``{device}`` and ``{fp8}``
in a pattern stand for the platform's device and fp8 flavour.

An entry with a ``host:`` condition (CPU flags present or absent) applies only on a host
where it holds: elsewhere the test runs as any other and must pass. Callers that know
the host (the plugin, a run's unmatched check) pass its flags; one that does not (the
nightly report, reading runs of many hosts) passes None and keeps every entry, marked.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.results.testids import normalise_test_id

if TYPE_CHECKING:
    from harness.matrix.model import HostCondition, Matrix


@dataclass
class Entry:
    pattern: str
    action: str
    reason: str
    where: str
    expires: _dt.date | None
    issue: str = ""
    owner: str = ""
    raw: str = ""  # the id as the matrix writes it
    # the failure it expects (harness.plugin.failure_expect), None if it has none; not
    # Optional: the plugin hands it on as a mapping once it has seen it set
    expect: Any = None
    host: HostCondition | None = None  # the host it depends on (None: every host)
    engine_fallback: str = ""  # what the engine itself does when this failure happens in it
    matched: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.regex = glob_to_regex(self.pattern)

    @property
    def expired(self) -> bool:
        return self.expires is not None and self.expires < _dt.date.today()

    @property
    def file_part(self) -> str:
        """The test file the pattern names (before ``::``), for "matched nothing" checks."""
        return self.pattern.partition("::")[0]

    def covers(self, nodeid: str) -> bool:
        """Whether this entry names the test (any spelling of its devices and dtypes)."""
        return self.regex.match(normalise_test_id(nodeid)) is not None

    def describe(self) -> str:
        issue = f" ({self.issue})" if self.issue else ""
        host = f" ({self.host.describe()})" if self.host else ""
        return f"{self.reason}{issue}{host} [{self.where}]"


def entries_from_matrix(
    matrix: Matrix,
    *,
    device: str,
    fp8: str | None,
    has: Callable[[str], bool],
    host_flags: frozenset[str] | None,
) -> list[Entry]:
    """The entries that apply here: an entry with ``requires`` only where the profile
    has every one of those capabilities (so an emulated profile drops hardware ones), an
    entry with ``host`` only where ``host_flags`` meet it (None: the host is not known)."""
    entries = []
    for kf in matrix.known_failures:
        if not all(has(cap) for cap in kf.requires):
            continue
        if kf.host is not None and host_flags is not None and not kf.host.holds(host_flags):
            continue
        pattern = normalise_test_id(
            kf.id.replace("{device}", device).replace("{fp8}", fp8 or "nofp8")
        )
        where = f"{kf.file}:{kf.line}" if getattr(kf, "line", None) else str(kf.file)
        entries.append(
            Entry(
                pattern=pattern,
                action=kf.action,
                reason=kf.reason,
                where=where,
                expires=kf.expires,
                issue=kf.issue or "",
                owner=kf.owner or "",
                raw=kf.id,
                expect=kf.expect,
                host=kf.host,
                engine_fallback=kf.engine_fallback,
            )
        )
    return entries


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    parts = []
    for char in pattern:
        parts.append(".*" if char == "*" else "." if char == "?" else re.escape(char))
    return re.compile("".join(parts) + r"\Z", re.DOTALL)


def entries_for(
    matrix: Matrix, *, emulate: bool, host_flags: frozenset[str] | None
) -> list[Entry]:
    """The entries of ``matrix`` as they apply to its lane (emulated on the CPU or not) on
    a host with ``host_flags`` (None: any host)."""
    return entries_from_matrix(
        matrix,
        device="cpu" if emulate else matrix.device,
        fp8=matrix.fp8.e4m3,
        has=lambda cap: bool(matrix.capabilities.has(cap, emulate=emulate)),
        host_flags=host_flags,
    )


def match(entries: Iterable[Entry], nodeid: str) -> Entry | None:
    for entry in entries:
        if entry.covers(nodeid):
            entry.matched.append(nodeid)
            return entry
    return None
