"""``native``: the plain-torch fp32 reference. Always available, supports every op."""

from __future__ import annotations

from refengine.ops import reference
from refengine.ops.spec import OP_NAMES
from refengine.providers import TableProvider


class NativeProvider(TableProvider):
    name = "native"


def make_provider(device: str) -> NativeProvider:
    return NativeProvider(device, {op: getattr(reference, op) for op in OP_NAMES})
