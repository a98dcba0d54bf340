"""Golden token ids per lane: suites/e2e/golden/<platform>[-emulated].json, or a parent
lane's where the matrix inherits them, recorded into the project (the one rule:
harness/matrix/lane_data.py). A file says which torch and which host recorded it."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness.matrix.lane_data import KINDS, LaneDataMissing, LaneFiles, lane_files

GOLDEN_DIR = Path(__file__).parent / "golden"


class Golden:
    def __init__(self, files: LaneFiles, update: bool) -> None:
        # read: the lane's own, or the parent's it inherits; own: where it records
        self.path, self.own, self.update = files.read, files.own, update
        self.data: dict[str, Any] = (json.loads(self.path.read_text()) if self.path.is_file()
                                     else {})
        self.found: dict[str, list[int]] = {}

    def check(self, key: str, ids: list[int]) -> None:
        """Compare ``ids`` with the golden ones; under update, record them instead."""
        if self.update:
            self.found[key] = ids
            return
        want = self.data.get("ids", {}).get(key)
        if want is None:
            raise LaneDataMissing(
                f"{key}: {KINDS['golden'][1]} {self.path}; run with --update-expectations and "
                "review"
            )
        if want != ids:
            first = next(
                (i for i, (a, b) in enumerate(zip(want, ids, strict=False)) if a != b),
                min(len(want), len(ids)),
            )
            raise AssertionError(
                f"{key}: token {first} is {ids[first] if first < len(ids) else '(none)'}, "
                f"golden {want[first] if first < len(want) else '(none)'} ({self.path})"
            )

    def write(self, torch_version: str, host: str) -> None:
        """Merge the recorded ids into the file. xdist workers each hold their own tests'
        ids, so re-read under a lock on the folder rather than overwrite."""
        if not self.found:
            return
        self.own.parent.mkdir(parents=True, exist_ok=True)
        folder = os.open(self.own.parent, os.O_RDONLY)
        try:
            fcntl.flock(folder, fcntl.LOCK_EX)
            current = json.loads(self.own.read_text()) if self.own.is_file() else {}
            ids = {**current.get("ids", {}), **self.found}
            body = {"torch": torch_version, "host": host,
                    "ids": {k: ids[k] for k in sorted(ids)}}
            self.own.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
        finally:
            os.close(folder)
        print(f"\nwrote {self.own} ({len(self.found)} sequences)")


@pytest.fixture(scope="session")
def golden(request: pytest.FixtureRequest, platform: Any) -> Any:
    import torch

    from harness.platform.host import host_fingerprint

    files = lane_files(GOLDEN_DIR.parent, "golden", platform.matrix, bool(platform.emulate))
    store = Golden(files, bool(request.config.getoption("--update-expectations")))
    yield store
    host = host_fingerprint()
    emulated = f", emulated by qemu-user ({host.cpu_emulated})" if host.cpu_emulated else ""
    store.write(str(torch.__version__), f"{host.cpu or 'unknown CPU'} ({host.machine}: "
                f"{' '.join(host.cpu_flags) or 'no flag harness reads'}{emulated})")
