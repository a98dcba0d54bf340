"""A test's op record: which of the engine's kernel ops it called, and how often (the
``ops`` property, written by plugin/ops.py; the sidecar, JUnit and the history keep it as
they keep any property). One format, read and written here.

A key is ``namespace::op`` for an op called through ``torch.ops`` (vLLM's ``_C::rms_norm``,
an overload's name left out), or ``provider/op`` for a kernel refengine's registry (or a
suite, calling a provider itself) ran (``triton/rms_norm``). The value is the keys with
their call counts, ``key=count``, one space between, in key order:
``_C::rms_norm=3 vllm/rms_norm=3``.
"""

from __future__ import annotations

from collections.abc import Mapping

PROPERTY = "ops"


def render(counts: Mapping[str, int]) -> str:
    """The property's value for ``counts`` (keys never hold a space or ``=``); "" for none."""
    return " ".join(f"{key}={counts[key]}" for key in sorted(counts) if counts[key] > 0)


def parse(text: str) -> dict[str, int]:
    """The counts of a property's value; a word that is not ``key=count`` is left out."""
    counts: dict[str, int] = {}
    for word in text.split():
        key, sep, count = word.rpartition("=")
        if sep and key and count.isdigit():
            counts[key] = counts.get(key, 0) + int(count)
    return counts


def namespace(key: str) -> str:
    """The torch namespace of a ``namespace::op`` key ("" for a provider's ``provider/op``)."""
    name, sep, _ = key.partition("::")
    return name if sep else ""
