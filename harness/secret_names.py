"""Which environment variables hold secrets: their values never reach a log or a file.

A name is secret when one of its ``_``-separated words is a secret word, so
``HF_TOKEN`` and ``AWS_SECRET_ACCESS_KEY`` are, and ``TIKTOKEN_CACHE_DIR`` is not.
"""

from __future__ import annotations

from collections.abc import Mapping

SECRET_WORDS = frozenset(
    {"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY", "PAT"}
)


def is_secret(name: str) -> bool:
    return any(word in SECRET_WORDS for word in name.upper().split("_"))


def masked(env: Mapping[str, str]) -> dict[str, str]:
    return {k: ("***" if is_secret(k) else v) for k, v in env.items()}
