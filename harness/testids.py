"""Normalised test ids: one spelling for a test whatever its device ordinal or dtype alias.

Known failures match on these, and the history keys test cases by them, so that
``test_x[cuda:0-torch.bfloat16]`` and ``test_x[cuda-bf16]`` are the same test. No pytest
import here: the CLI uses it at start-up.
"""

from __future__ import annotations

import re

_DEVICE_ORDINAL = re.compile(r"\b(cuda|xpu|hip|mps):\d+\b")
_TORCH_PREFIX = re.compile(r"\btorch\.")
_ALIASES = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float": "float32",
}
_ALIAS_RE = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(_ALIASES) + r")(?![A-Za-z0-9_])")


def normalise_test_id(nodeid: str) -> str:
    """Strip device ordinals, ``torch.`` prefixes and dtype aliases from a test id."""
    text = _DEVICE_ORDINAL.sub(r"\1", nodeid)
    text = _TORCH_PREFIX.sub("", text)
    return _ALIAS_RE.sub(lambda m: _ALIASES[m.group(1)], text)
