"""A failure's fingerprint: its words with the values masked, so the same failure seen with
other values (a larger error, another shape, another address) reads the same, and another
failure does not. The one masker of "the same failure": ``harness report compare`` (and
bisect, through it), ``--minimize``'s sameness of a shrunk case, and every standalone
script, which carries :func:`mask`'s own source (:func:`mask_source`).

A number is masked only as a token of its own (``head_dim=32``, ``[2, 8]``, ``1.5e-3``),
never inside a word: ``float16`` and ``float32``, ``_C_AVX2`` and ``_C_AVX512`` name
different things, and a message that differs there is another failure.
"""

from __future__ import annotations

import inspect
import re

NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")
ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
LIMIT = 300


def mask(text: str) -> str:
    """``text`` with its numbers and addresses masked, cut to LIMIT characters."""
    return NUMBER.sub("#", ADDRESS.sub("0x#", text))[:LIMIT]


def mask_source() -> str:
    """:func:`mask` as a script carries it (it needs ``re``): the same code, not a copy."""
    return (f"NUMBER = re.compile({NUMBER.pattern!r})\nADDRESS = re.compile("
            f"{ADDRESS.pattern!r})\nLIMIT = {LIMIT}\n\n\n{inspect.getsource(mask)}")
