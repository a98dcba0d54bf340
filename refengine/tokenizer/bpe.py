"""Train a byte-level BPE vocabulary and write it in tiktoken's file format.

Deterministic: ties between equally frequent pairs break on the pair's bytes, and the
words are visited in sorted order, so the same corpus always gives the same file.
"""

from __future__ import annotations

import base64
import itertools
from collections import Counter

import regex


def _split_words(text: str, pat_str: str) -> Counter[bytes]:
    return Counter(m.encode("utf-8") for m in regex.findall(pat_str, text))


def train(text: str, pat_str: str, max_merges: int, min_count: int = 2) -> dict[bytes, int]:
    """Return mergeable ranks: the 256 single bytes, then one rank per learned merge."""
    ranks: dict[bytes, int] = {bytes([b]): b for b in range(256)}
    words = sorted(_split_words(text, pat_str).items())
    pieces: list[tuple[list[bytes], int]] = [([bytes([b]) for b in w], n) for w, n in words]
    for _ in range(max_merges):
        counts: Counter[tuple[bytes, bytes]] = Counter()
        for parts, n in pieces:
            for pair in itertools.pairwise(parts):
                counts[pair] += n
        # A pair whose concatenation is already a token adds nothing new to the vocabulary.
        candidates = [
            (c, p) for p, c in counts.items() if c >= min_count and p[0] + p[1] not in ranks
        ]
        if not candidates:
            break
        best_count = max(c for c, _ in candidates)
        best = min(p for c, p in candidates if c == best_count)
        merged = best[0] + best[1]
        ranks[merged] = len(ranks)
        for parts, _n in pieces:
            i = 0
            while i < len(parts) - 1:
                if parts[i] == best[0] and parts[i + 1] == best[1]:
                    parts[i : i + 2] = [merged]
                i += 1
    return ranks


def dumps(ranks: dict[bytes, int]) -> bytes:
    """tiktoken's format: base64 of the token, a space, its rank; one per line, by rank."""
    lines = [
        base64.b64encode(token) + b" " + str(rank).encode()
        for token, rank in sorted(ranks.items(), key=lambda item: item[1])
    ]
    return b"\n".join(lines) + b"\n"
