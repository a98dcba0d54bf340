"""A failure's fingerprint: its words with the values masked, so the same failure seen with
other values (a larger error, another shape, another address) reads the same, and another
failure does not. The one masker of "the same failure": ``harness report compare`` (and
bisect, through it), ``--minimize``'s sameness of a shrunk case, and every standalone
script, which carries the source of :func:`mask` and :func:`same_failure` (:func:`mask_source`).

A number is masked only as a token of its own (``head_dim=32``, ``[2, 8]``, ``1.5e-3``),
never inside a word: ``float16`` and ``float32``, ``_C_AVX2`` and ``_C_AVX512`` name
different things, and a message that differs there is another failure.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping

NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")
ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
LIMIT = 300


def mask(text: str) -> str:
    """``text`` with its numbers and addresses masked, cut to LIMIT characters."""
    return NUMBER.sub("#", ADDRESS.sub("0x#", text))[:LIMIT]


def same_failure(expected: Mapping[str, object], seen: Mapping[str, object]) -> bool:
    """Whether ``seen`` is the failure ``expected`` names: the same kind; an exception of
    the same type with the same message up to its numbers (:func:`mask`); a signal the same
    signal; any other kind (a mismatch, tokens that differ) by its kind alone."""
    kind = seen.get("kind")
    if kind is None or kind != expected.get("kind"):
        return False
    if kind == "exception":
        return bool(seen.get("type") == expected.get("type")
                    and mask(str(seen.get("message"))) == mask(str(expected.get("message"))))
    if kind == "signal":
        return bool(seen.get("signal") == expected.get("signal"))
    return True


def mask_source() -> str:
    """:func:`mask` and :func:`same_failure` as a script carries them (they need ``re``): the
    same code, not a copy."""
    return ("from collections.abc import Mapping\n\n"
            f"NUMBER = re.compile({NUMBER.pattern!r})\nADDRESS = re.compile("
            f"{ADDRESS.pattern!r})\nLIMIT = {LIMIT}\n\n\n{inspect.getsource(mask)}\n\n"
            f"{inspect.getsource(same_failure)}")
