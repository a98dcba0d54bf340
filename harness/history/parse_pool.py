"""Parse the JUnit files of an ingest, in worker processes when there are many.

XML parsing is most of an ingest's CPU time and SQLite takes one writer, so big
ingests parse in a few worker processes (``serve`` below) while this one writes.
File ``i`` goes to worker ``i % n`` and its results are read back in order, so the
database and the warnings do not depend on which worker was quicker. A worker sends
each file as batches of at most ``rows.BATCH`` cases made into rows, then one message
with its suites and warnings; blocked on its full stdout pipe (widened to 1 MiB: a few
files ahead), it waits for the writer. So memory is bounded per case, not per file or
testsuite: a 200 MB file of one ``<testsuite>`` never sits whole in either process.
Small ingests (the nightly run, the tests) parse in-process, streaming the same way.

Plain ``subprocess`` rather than ``multiprocessing``: no fork of a process holding an
open database, and no re-import of the caller's ``__main__``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

import harness
from harness.errors import InfraError
from harness.history.rows import Batch, RowMaker
from harness.results import layout
from harness.results.junit_read import JunitReader, Suite

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

Warn = Callable[[str], None]
# Below this much XML the workers cost more to start than they save.
POOL_MIN_BYTES = 16 << 20
MAX_WORKERS = 4
_HEADER = struct.Struct("<Q")
_WORKER = "from harness.history.parse_pool import serve; serve()"
_STOP_TIMEOUT_S = 5.0
PIPE_BYTES = 1 << 20  # the default /proc/sys/fs/pipe-max-size


@dataclass
class Parsed:
    """One file's cases as batches of rows, a stream to read once and in file order;
    ``suites`` is complete once that stream is exhausted."""

    path: Path
    batches: Iterable[Batch]
    suites: dict[str, Suite] = field(default_factory=dict)


def default_workers(files: Sequence[Path]) -> int:
    """Worker processes for these files: 0 (parse in-process) unless they are big and
    at least two CPUs are idle now.

    Workers cost more CPU in all (pickling, start-up: about a sixth more for 1M cases
    on 2 cores), so on a busy machine they only take time from the neighbours without
    finishing sooner (measured: at load 7 on 2 cores, 66 s wall with two workers, 50 s
    without).
    """
    try:  # a file's sidecar (node ids, properties) is parsed with it
        size = sum(path.stat().st_size + _size(layout.partial_for(path)) for path in files)
    except OSError:
        return 0
    if size < POOL_MIN_BYTES:
        return 0
    spare = round(idle_cpus())
    return min(spare, MAX_WORKERS, len(files)) if spare >= 2 else 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def idle_cpus(sample_s: float = 0.1) -> float:
    """How many of the CPUs this process may use were idle over the next ``sample_s``
    (from /proc/stat; elsewhere the CPUs less the load average). Not the load average
    on Linux: it trails by a minute, so a run that just ended would still count."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    first = _cpu_ticks(cpus)
    if first is None:
        busy = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        return (len(cpus) or os.cpu_count() or 1) - busy
    time.sleep(sample_s)
    second = _cpu_ticks(cpus) or first
    idle, total = (b - a for a, b in zip(first, second, strict=True))
    return len(cpus) * idle / total if total > 0 else float(len(cpus))


def _cpu_ticks(cpus: Sequence[int]) -> tuple[int, int] | None:
    """(idle, all) clock ticks so far of these CPUs, summed; None without /proc/stat."""
    wanted = {f"cpu{cpu}" for cpu in cpus}
    idle = total = 0
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            for line in stat:
                name, _, rest = line.partition(" ")
                if name in wanted:
                    ticks = [int(field) for field in rest.split()[:8]]
                    idle += ticks[3] + ticks[4]  # idle, iowait
                    total += sum(ticks)
    except (OSError, ValueError, IndexError):
        return None
    return (idle, total) if wanted and total else None


# A worker's messages: ("rows", batch, []) any number of times, then
# ("end", [(name, timestamp, hostname, properties), ...], [warning, ...]) per file.
_SuiteItem = tuple[str, str, str, dict[str, str]]  # (name, timestamp, hostname, properties)
_Message = (tuple[Literal["rows"], Batch, list[str]]
            | tuple[Literal["end"], list[_SuiteItem], list[str]])


def _in_process(files: Sequence[Path], warn: Warn) -> Generator[Parsed, None, None]:
    maker = RowMaker()
    for path in files:
        reader = JunitReader(path, warn)
        yield Parsed(path, maker.batches(reader.batches(), reader.suites), reader.suites)


def _messages(path: Path, maker: RowMaker) -> Iterator[_Message]:
    """In a worker: one file as batches of rows (plain lists and tuples, which pickle
    fast), then its suites and warnings."""
    warnings: list[str] = []
    reader = JunitReader(path, warnings.append)
    for batch in maker.batches(reader.batches(), reader.suites):
        yield "rows", batch, []
    suites = [(s.name, s.timestamp, s.hostname, s.properties) for s in reader.suites.values()]
    yield "end", suites, warnings


def serve() -> None:
    """The worker: NUL-separated paths on stdin; length-prefixed pickles out."""
    # Ctrl-C reaches the whole process group; the writer alone decides to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    paths = [os.fsdecode(raw) for raw in sys.stdin.buffer.read().split(b"\0") if raw]
    out = sys.stdout.buffer
    maker = RowMaker()
    try:
        for path in paths:
            for message in _messages(Path(path), maker):
                data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
                out.write(_HEADER.pack(len(data)))
                out.write(data)
            out.flush()
    except BrokenPipeError:
        os._exit(1)  # the writer stopped early and closed the pipe: nothing to report


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError
    return data


def _start(paths: Sequence[Path]) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    root = str(Path(harness.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (root, env.get("PYTHONPATH"))))
    proc = subprocess.Popen(
        [sys.executable, "-c", _WORKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    _widen(proc.stdout)
    # The worker reads all of stdin before it writes anything, so this cannot block
    # against a full stdout pipe.
    try:
        proc.stdin.write(b"\0".join(os.fsencode(path) for path in paths))
        proc.stdin.close()
    except BrokenPipeError:
        pass  # it died already: reading its first result says so
    return proc


def _widen(pipe: IO[bytes]) -> None:
    """Let a worker run up to ``PIPE_BYTES`` ahead of the writer (Linux; elsewhere, or
    past the system's pipe-max-size, the pipe keeps its size). The default 64 KiB is
    less than one batch, so a worker waited on the writer after every file, and the
    writer on the worker whose file came next (1M cases on 2 cores, two workers: a
    third less wall time with 1 MiB pipes)."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl else None
    if setsize is None:
        return
    with contextlib.suppress(OSError):
        fcntl.fcntl(pipe.fileno(), setsize, PIPE_BYTES)


def _received(
    proc: subprocess.Popen[bytes], path: Path, parsed: Parsed, warn: Warn
) -> Iterator[Batch]:
    """The batches of one file as its worker sends them; fills ``parsed.suites`` at its
    end."""
    assert proc.stdout is not None
    while True:
        try:
            size = _HEADER.unpack(_read_exact(proc.stdout, _HEADER.size))[0]
            kind, items, warnings = pickle.loads(_read_exact(proc.stdout, size))
        except EOFError:
            code = proc.wait()
            raise InfraError(
                f"JUnit parser worker stopped (exit {code}) before reading {path}"
            ) from None
        if kind == "rows":
            yield items
            continue
        for line in warnings:
            warn(line)
        for name, timestamp, host, props in items:
            parsed.suites[name] = Suite(
                name=name, timestamp=timestamp, hostname=host, properties=props
            )
        return


def _pooled(files: Sequence[Path], warn: Warn, workers: int) -> Generator[Parsed, None, None]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for index in range(workers):
            procs.append(_start(files[index::workers]))
        for index, path in enumerate(files):
            parsed = Parsed(path, ())
            parsed.batches = _received(procs[index % workers], path, parsed, warn)
            yield parsed
    finally:
        for proc in procs:
            if proc.stdout is not None:
                proc.stdout.close()
            try:
                proc.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def parse_files(
    files: Sequence[Path], warn: Warn, workers: int | None = None
) -> Generator[Parsed, None, None]:
    """Each file's rows and suites, in order; ``workers`` None picks by size, 0 in-process.

    Read each file's ``batches`` to the end before the next file's: a worker's files
    arrive one after the other on one pipe.
    """
    count = default_workers(files) if workers is None else min(workers, len(files))
    if count <= 0:
        return _in_process(files, warn)
    return _pooled(files, warn, count)
