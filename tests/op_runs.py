"""What a run folder's producers wrote of the engine's ops: the surface its run recorded
(the manifest's fingerprint) and the ops each test recorded (the suite's sidecar); what the
ops view is held against (tests/unit/test_ops_view.py, tests/integration/test_report_ops.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.results.op_record import parse


def _sidecar(run: Path) -> list[dict[str, Any]]:
    lines = (run / "junit" / "kernel_parity.partial.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def offered_and_called(run: Path) -> tuple[set[str], set[str]]:
    """The ops the run's engine offered, and those its tests called."""
    manifest = json.loads((run / "manifest.json").read_text())
    called: set[str] = set()
    for record in _sidecar(run):
        called |= set(parse(record["properties"].get("ops", "")))
    return set(manifest["device_fingerprint"]["engine_ops"]), called


def callers_by_op(run: Path) -> dict[str, set[str]]:
    """Each op the run's tests called -> the node ids that called it."""
    out: dict[str, set[str]] = {}
    for record in _sidecar(run):
        for op in parse(record["properties"].get("ops", "")):
            out.setdefault(op, set()).add(record["nodeid"])
    return out
