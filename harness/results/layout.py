"""Every name inside a run folder, and the lane a run belongs to, in one place.

```
<reports>/<matrix>/<run-id>/
  manifest.json  matrix.json  merged.xml  device_fingerprint.json
  durations.json (a sharded run)  select.json (--changed-since)
  junit/<suite>.xml            junit/<suite>-shard-<i>-of-<N>.xml
  junit/<stem>.partial.jsonl   junit/<stem>.progress.jsonl   logs/<stem>.log
```

``<stem>.partial.jsonl`` holds each finished test with its properties (JUnit's sidecar:
xunit2 has no per-case properties); ``<stem>.progress.jsonl`` the collected node ids and
each test as it starts (what a crash or a hang was running, what never ran).

The writers (plan, runners, workflow) and the readers (ingest, repro, shard durations)
both call these functions, so a name changes in one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "manifest.json"
MATRIX = "matrix.json"
MERGED = "merged.xml"
FINGERPRINT = "device_fingerprint.json"
JUNIT_DIR = "junit"
LOGS_DIR = "logs"
DURATIONS = "durations.json"
SELECTION = "select.json"
TEST_MEMORY = "test-memory.json"  # each suite's tests' memory needs, for the plugin
EMULATED = " (emulated)"

PARTIAL_SUFFIX = ".partial.jsonl"
PROGRESS_SUFFIX = ".progress.jsonl"
ENGINE_OPS_SUFFIX = ".engine-ops.json"  # the ops the engine offered the suite (plugin/ops.py)

_SHARD_STEM = re.compile(r"^(?P<suite>.+)-shard-(?P<index>\d+)-of-(?P<total>\d+)$")


@dataclass(frozen=True, kw_only=True)
class Lane:
    """Runs compared with each other: a matrix, and apart from it its emulated runs.

    Shown (and stored in the history) as the matrix name, plus ``" (emulated)"``."""

    matrix: str
    emulated: bool = False

    def __str__(self) -> str:
        return self.matrix + (EMULATED if self.emulated else "")

    @classmethod
    def parse(cls, text: str) -> Lane:
        """``"rocm (emulated)"`` -> Lane(matrix="rocm", emulated=True)."""
        if text.endswith(EMULATED):
            return cls(matrix=text.removesuffix(EMULATED), emulated=True)
        return cls(matrix=text)


_SHARD = re.compile(r"(\d+)/(\d+)")


@dataclass(frozen=True, kw_only=True)
class Shard:
    """One shard of a suite, 1-based: ``"i/N"`` in ``--shard``, the manifest and the plans."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/4"`` -> Shard(index=2, count=4); ValueError unless digits with 1 <= i <= N.

        The one parser of the shard spelling: each caller words its own refusal."""
        found = _SHARD.fullmatch(text)
        if not found or not 1 <= int(found[1]) <= int(found[2]):
            raise ValueError(f"{text!r}: expected i/N with 1 <= i <= N, e.g. 2/4")
        return cls(index=int(found[1]), count=int(found[2]))


def run_dir(reports: Path, matrix: str, run_id: str) -> Path:
    return reports / matrix / run_id


def junit_stem(suite: str, shard: Shard | str | None) -> str:
    """A suite's file name stem; ``shard`` as the run carries it, or as a manifest wrote it."""
    if not shard:
        return suite
    index, _, total = str(shard).partition("/")
    return f"{suite}-shard-{index}-of-{total}"


def junit_rel(suite: str, shard: Shard | str | None) -> str:
    return f"{JUNIT_DIR}/{junit_stem(suite, shard)}.xml"


def partial_rel(suite: str, shard: Shard | str | None) -> str:
    return f"{JUNIT_DIR}/{junit_stem(suite, shard)}{PARTIAL_SUFFIX}"


def log_rel(suite: str, shard: Shard | str | None) -> str:
    return f"{LOGS_DIR}/{junit_stem(suite, shard)}.log"


def partial_for(junit: Path) -> Path:
    """The partial-results file written beside a suite's JUnit file (its sidecar)."""
    return junit.with_name(junit.stem + PARTIAL_SUFFIX)


def _beside_partial(partial: Path, suffix: str) -> Path:
    name = partial.name
    stem = name[: -len(PARTIAL_SUFFIX)] if name.endswith(PARTIAL_SUFFIX) else name
    return partial.with_name(stem + suffix)


def progress_for_partial(partial: Path) -> Path:
    """The progress file the plugin writes beside a partial-results file."""
    return _beside_partial(partial, PROGRESS_SUFFIX)


def engine_ops_for_partial(partial: Path) -> Path:
    """The file of the engine's ops (its kernel surface) the plugin writes beside a
    partial-results file."""
    return _beside_partial(partial, ENGINE_OPS_SUFFIX)


def suite_of(junit: Path) -> tuple[str, str | None]:
    """``fusion-shard-2-of-4.xml`` -> ("fusion", "2/4"); ``e2e.xml`` -> ("e2e", None)."""
    found = _SHARD_STEM.match(junit.stem)
    if found:
        return found["suite"], f"{found['index']}/{found['total']}"
    return junit.stem, None


def junit_files(folder: Path) -> list[Path]:
    """A run folder's suite JUnit files (the merged file only when there are none)."""
    files = sorted((folder / JUNIT_DIR).glob("*.xml"))
    if not files and (folder / MERGED).is_file():
        files = [folder / MERGED]
    return files


def run_folders(path: Path) -> list[Path]:
    """Run folders at or under ``path`` (an artifact download may nest them)."""
    return sorted({m.parent for m in path.rglob(MANIFEST) if m.parent.joinpath(JUNIT_DIR).is_dir()
                   or m.parent.joinpath(MATRIX).is_file()})
