"""Which environment variables hold secrets: their values never reach a log or a file.

A name is secret when one of its ``_``-separated words is a secret word, so
``HF_TOKEN`` and ``AWS_SECRET_ACCESS_KEY`` are, and ``TIKTOKEN_CACHE_DIR`` is not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

SECRET_WORDS = frozenset(
    {"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY", "PAT"}
)


def is_secret(name: str) -> bool:
    return any(word in SECRET_WORDS for word in name.upper().split("_"))


def masked(env: Mapping[str, str]) -> dict[str, str]:
    return {k: ("***" if is_secret(k) else v) for k, v in env.items()}


# -- values ------------------------------------------------------------------------------
# A secret's value is masked wherever the harness writes or prints: the suite's console
# lines and log, its JUnit, partial and progress files (rewritten when the suite ends),
# the manifest.
MIN_SECRET_LEN = 8  # shorter values ("1", "true", "none") would mask ordinary text
MASK = "***"
_values: list[str] = []


def register_secrets(env: Mapping[str, str]) -> None:
    """Remember the values of the secret-named variables in ``env`` (longest first)."""
    found = {v for k, v in env.items() if is_secret(k) and len(v) >= MIN_SECRET_LEN}
    forms = set()
    for value in found:
        forms.update({value, _xml_escaped(value), json.dumps(value)[1:-1]})
    _values[:] = sorted(forms, key=len, reverse=True)


def scrub(text: str) -> str:
    for value in _values:
        if value in text:
            text = text.replace(value, MASK)
    return text


def scrub_file(path: Path) -> None:
    """Rewrite ``path`` (atomically) with every secret value masked; absent files pass."""
    if not _values or not path.is_file():
        return
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    clean = scrub(text)
    if clean == text:
        return
    tmp = path.with_name(path.name + ".scrub")
    try:
        tmp.write_text(clean, encoding="utf-8", errors="surrogateescape")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _xml_escaped(value: str) -> str:
    return escape(value, {'"': "&quot;"})
