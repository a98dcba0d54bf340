"""manifest.json: what ran, where, how, and how it ended. Rewritten after every step
(atomically), so a crash or Ctrl-C still leaves an accurate record."""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from harness.runners.outcome import SuiteOutcome

SCHEMA = 1


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class Manifest:
    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data: dict[str, Any] = {
            "schema": SCHEMA,
            "status": "running",
            "suites": [],
            "infra_error": None,
            **data,
        }
        self.write()

    def write(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.data, indent=2, sort_keys=False, default=str) + "\n")
        os.replace(tmp, self.path)

    def update(self, **fields: Any) -> None:
        self.data.update(fields)
        self.write()

    def add_outcome(self, outcome: SuiteOutcome) -> None:
        self.data["suites"].append(outcome.as_dict())
        self.write()

    def finish(self, *, status: str, exit_code: int, infra_error: dict[str, str] | None) -> None:
        self.data.update(status=status, exit_code=exit_code, infra_error=infra_error, ended=now())
        self.write()


def load_manifest(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "manifest.json").read_text())
    return data
