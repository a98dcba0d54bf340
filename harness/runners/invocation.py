"""One pytest process to run: what the plan makes and every runner executes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.results.layout import Shard


@dataclass(frozen=True, kw_only=True)
class Invocation:
    suite: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    junit: Path
    log: Path
    partial: Path
    timeout_s: float
    workers: int
    shard: Shard | None = None
    threads: int | None = None  # its own thread count, in env too (run/plan.py); None: the run's
    rootdir: Path = Path()  # node ids (and known_failures ids) are relative to it
    cwd: Path | None = None  # None: the harness's own working folder
    max_skip_ratio: float = 0.5
