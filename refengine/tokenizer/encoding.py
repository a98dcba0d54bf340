"""Load a shipped encoding through tiktoken's own cached loader, never the network.

tiktoken looks for ``$TIKTOKEN_CACHE_DIR/<sha1(url)>`` and downloads on a miss. The
URLs here use the reserved ``.invalid`` domain, and we check the cache file ourselves
first, so a cold or corrupt cache fails at once with a message that says what to do,
instead of a DNS error (or tiktoken deleting the corrupt file and trying to download).
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from refengine.tokenizer.spec import load_specs

if TYPE_CHECKING:
    import tiktoken

DEFAULT_ENCODING = "refengine_bpe"
PRIME_HINT = "run `harness cache prime --matrix <matrix>` and set TIKTOKEN_CACHE_DIR"


class TokenizerCacheError(RuntimeError):
    """The tokenizer cache is not set, cold or corrupt."""


def cache_key(url: str) -> str:
    return hashlib.sha1(url.encode()).hexdigest()


def _cache_dir() -> str:
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        value = os.environ.get(var)
        if value:
            return value
    raise TokenizerCacheError(f"TIKTOKEN_CACHE_DIR is not set; {PRIME_HINT}")


def cache_path(name: str = DEFAULT_ENCODING) -> Path:
    spec = load_specs()[name]
    return Path(_cache_dir()) / cache_key(spec.url)


def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """The encoding ``name`` from the tiktoken cache; raises TokenizerCacheError if unusable."""
    specs = load_specs()
    if name not in specs:
        raise TokenizerCacheError(f"unknown encoding {name!r}; known: {', '.join(sorted(specs))}")
    spec = specs[name]
    path = Path(_cache_dir()) / cache_key(spec.url)
    if not path.is_file():
        raise TokenizerCacheError(
            f"tokenizer cache is cold: {path} ({name}) is missing; {PRIME_HINT}"
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != spec.sha256:
        raise TokenizerCacheError(
            f"tokenizer cache is corrupt: {path} ({name}) has sha256 {digest[:12]}..., "
            f"expected {spec.sha256[:12]}...; {PRIME_HINT}"
        )
    return _build(name, str(path.parent), spec.sha256)


@functools.lru_cache(maxsize=4)
def _build(name: str, cache_dir: str, sha256: str) -> tiktoken.Encoding:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    spec = load_specs()[name]
    ranks = load_tiktoken_bpe(spec.url, expected_hash=sha256)
    return tiktoken.Encoding(
        name=name,
        pat_str=spec.pat_str,
        mergeable_ranks=ranks,
        special_tokens=spec.special_tokens,
    )
