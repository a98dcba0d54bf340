"""A JUnit file's sidecar: the partial file the plugin wrote beside it, read as a stream.

xunit2 JUnit (what ``harness run`` writes) has no ``<properties>`` per test case, so a
case's pytest node id and properties come from ``<stem>.partial.jsonl`` (one line per
finished test, ``plugin/partial.py``). The two are joined on the case's address, the
(``classname``, ``name``) pair pytest's JUnit writer derives from the node id
(:func:`address`). The partial file is in the order tests ended, the JUnit file in the
order they started: the same order without xdist, nearly the same with it. So the
sidecar is read ahead only as far as the next case needs, and keeps a window of recent
lines: memory is bounded per case, not per file. A case it cannot find (the runner's
own case for a crash or a timeout, or one further than the window) keeps the id rebuilt
from its attributes.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from harness.results.junit_expat import NODEID_PROPERTY
from harness.results.layout import partial_for

# What labels a module that failed to import where its tests are from another release
# than the engine (harness run --across-releases): its JUnit text and its sidecar message.
RELEASE_MISMATCH = "release mismatch"


def release_mismatch(message: str, words: str) -> str:
    """A failed module's message (``collection failure``) labelled with why its tests are
    from another release: the JUnit error's message and the sidecar line's alike."""
    return f"{message}: {RELEASE_MISMATCH}: {words}"
WINDOW = 16384  # lines read ahead of the case being looked up, at most
_KEEP = 2 * WINDOW  # lines kept waiting for their case; past this the oldest go
_DROP = 1024  # dropped beyond that at once when full
_JOINED = 64  # lines kept after their case was joined (a test with more cases)
_RESULT = '{"nodeid": '  # a result line (plugin/partial.py writes the node id first)

Found = tuple[str, dict[str, str]]  # (node id, properties with the node id among them)


def address(nodeid: str) -> tuple[str, str]:
    """(classname, name) of a node id, the rule pytest's JUnit writer follows:
    ``a/b/test_c.py::TestD::test_e[x::y]`` -> (``a.b.test_c.TestD``, ``test_e[x::y]``)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    first = names[0].replace("/", ".")
    names[0] = first[:-3] if first.endswith(".py") else first
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def result_line(
    nodeid: str, when: str, outcome: str, duration: float, message: str,
    properties: Iterable[tuple[str, object]], details: str = "",
) -> str:
    """One finished test as a line of the partial file: the plugin's, the runner's for a
    test a crash stopped or never ran, and the scale bench's. ``message`` is the one-line
    cause (JUnit's ``message`` attribute), ``details`` the report's tail (its text)."""
    props = {str(k): str(v) for k, v in properties if k != NODEID_PROPERTY}
    record: dict[str, object] = {"nodeid": nodeid, "when": when, "outcome": outcome,
                                 "duration": round(duration, 6), "message": message}
    if details:
        record["details"] = details
    record["properties"] = props
    return json.dumps(record) + "\n"


def read_records(path: Path) -> list[dict[str, object]]:
    """Every result line of a partial file (to its end, or the line a crash cut short)."""
    return list(iter_records(path))


PEAK_RSS_PROPERTY = "peak_rss_mb"  # a test process's peak resident MB during the test
# how far above where it started the test took its process's resident memory (MB): what
# the test itself needs beside what its process holds, whatever earlier tests left there
GROWTH_PROPERTY = "rss_growth_mb"


def peak_memory(path: Path) -> tuple[float, str] | None:
    """The highest ``peak_rss_mb`` of a partial file's tests, and the test that reached it."""
    best: tuple[float, str] | None = None
    for record in iter_records(path):
        props = record.get("properties")
        value = props.get(PEAK_RSS_PROPERTY) if isinstance(props, dict) else None
        try:
            mb = float(value) if value is not None else None
        except (TypeError, ValueError):
            mb = None
        if mb is not None and (best is None or mb > best[0]):
            best = (mb, str(record["nodeid"]))
    return best


def iter_records(path: Path) -> Iterator[dict[str, object]]:
    """The result lines of a partial file one at a time (none when it is absent)."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the line being written when the process died (lines follow
                # it when the runner added the tests that never finished)
            if isinstance(record, dict) and isinstance(record.get("nodeid"), str):
                yield record


def _records(handle: IO[str]) -> Iterator[Found]:
    for line in handle:
        if not line.startswith(_RESULT):
            continue  # another kind of line, or one from a future version
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line being written when the process died
        nodeid = record.get("nodeid")
        if not isinstance(nodeid, str):
            continue
        props = _properties(record.get("properties"))
        props[NODEID_PROPERTY] = nodeid
        yield nodeid, props


def _properties(raw: object) -> dict[str, str]:
    """A line's properties: a dict since the partial file became JUnit's sidecar, a list of
    pairs before; anything else (a hand-edited or damaged line) reads as none."""
    if isinstance(raw, dict):
        return {str(k): str(v) for k, v in raw.items()}
    if isinstance(raw, list) and all(isinstance(p, list | tuple) and len(p) == 2 for p in raw):
        return {str(k): str(v) for k, v in raw}
    return {}


class Sidecar:
    """``find(classname, name)`` -> (node id, properties) of that case, or None.

    Lines read ahead wait in ``_ahead`` until their case comes (in order, none wait);
    the last few joined stay in ``_joined`` for a test with more than one case (rerun
    attempts, a failure and a teardown error)."""

    def __init__(self, path: Path) -> None:
        self._handle: IO[str] = path.open(encoding="utf-8", errors="replace")
        self._records: Iterator[Found] | None = _records(self._handle)
        self._ahead: dict[tuple[str, str], Found] = {}
        self._joined: dict[tuple[str, str], Found] = {}

    def find(self, classname: str, name: str) -> Found | None:
        key = (classname, name)
        found = self._ahead.pop(key, None) or self._joined.get(key) or self._read_to(key)
        if found is not None:
            joined = self._joined
            joined[key] = found
            if len(joined) > _JOINED:
                del joined[next(iter(joined))]
        return found

    def _read_to(self, key: tuple[str, str]) -> Found | None:
        """Read ahead to ``key``'s line, at most ``WINDOW`` lines."""
        if self._records is None:
            return None
        ahead = self._ahead
        read = 0
        found = None
        for record in itertools.islice(self._records, WINDOW):
            read += 1
            here = address(record[0])
            if here == key:
                found = record
                break
            ahead[here] = record
        if read < WINDOW and found is None:
            self.close()  # the file has ended
        if len(ahead) > _KEEP:  # the oldest go, a batch at a time
            for old in list(itertools.islice(ahead, len(ahead) - _KEEP + _DROP)):
                del ahead[old]
        return found

    def close(self) -> None:
        if self._records is not None:
            self._handle.close()
            self._records = None


def open_sidecar(junit: Path) -> Sidecar | None:
    """The sidecar of a JUnit file, when the plugin wrote one beside it."""
    try:
        return Sidecar(partial_for(junit))
    except OSError:
        return None
