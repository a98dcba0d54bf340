"""Reading a JSON file the harness wrote earlier (durations, a lane selection): any failure
is one ConfigError naming the file (and the line, for bad JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.errors import ConfigError


def read_json(path: Path, what: str) -> Any:
    """The parsed contents of ``path``; ``what`` names the file in the error."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"cannot read {what} ({error.strerror or error})",
                          file=str(path)) from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"not valid JSON ({error.msg})", file=str(path),
                          line=error.lineno) from None
