"""What each shipped encoding is: its name, the URL key it is cached under, its sha256.

The facts live in ``refengine/data/encodings.json`` (written by
``scripts/build_tokenizer.py``) so that the harness can read them without importing
this package (and with it, maybe torch).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
SPECS_FILE = DATA_DIR / "encodings.json"

# The split regex applied before BPE: contractions, letter runs, digit runs, punctuation
# runs (each with an optional leading space) and whitespace. Written for this project.
PAT_STR = (
    r"'(?:s|t|re|ve|m|ll|d)"
    r"| ?\p{L}+"
    r"| ?\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s+(?!\S)"
    r"|\s+"
)


@dataclass(frozen=True, kw_only=True)
class EncodingSpec:
    name: str
    url: str  # a key only: the .invalid domain can never be fetched
    sha256: str
    file: str  # file name under refengine/data/
    pat_str: str
    special_tokens: dict[str, int]

    @property
    def source(self) -> Path:
        return DATA_DIR / self.file


def load_specs(path: Path = SPECS_FILE) -> dict[str, EncodingSpec]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    specs = {}
    for entry in raw["encodings"]:
        spec = EncodingSpec(
            name=entry["name"],
            url=entry["url"],
            sha256=entry["sha256"],
            file=entry["file"],
            pat_str=entry["pat_str"],
            special_tokens={k: int(v) for k, v in entry["special_tokens"].items()},
        )
        specs[spec.name] = spec
    return specs
