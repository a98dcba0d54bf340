"""The tokenizer cache primed on one host and read on another gives the same ids.

``harness cache prime`` writes the BPE file on the host that starts the run (x86,
little-endian, in CI); the s390x lane mounts that same cache into its big-endian
container and tokenises there with s390x tiktoken. The file is text (base64 token,
space, rank), so nothing in it has a byte order, but everything that reads it runs
natively: tiktoken's loader and its Rust core (hashing byte pieces, rank lookup, the
split regex). Token ids are therefore SHARED across byte orders: one file,
golden/tokenizer.json, recorded once and checked on every platform. (The generated
ids of test_e2e.py are per platform instead: they come from each platform's arithmetic.)
"""

from __future__ import annotations

import json
import platform as host
import sys
from pathlib import Path
from typing import Any

import pytest

from refengine.tokenizer import cache_path, get_encoding
from refengine.tokenizer.spec import DATA_DIR

pytestmark = pytest.mark.tier("smoke")

GOLDEN = Path(__file__).parent / "golden" / "tokenizer.json"
# Multi-byte UTF-8 and byte-level fallbacks, digits, whitespace runs, a contraction.
EXTRA = (
    "naïve café, Grüße aus Köln — 東京で 🙂 token ids",
    "  2025-11-29\tlayers=32\n\nit's 0x7f3c",
)


def _texts() -> dict[str, str]:
    corpus = (DATA_DIR / "corpus.txt").read_text(encoding="utf-8").splitlines()
    texts = {f"corpus{i}": line for i, line in enumerate(corpus[:12]) if line}
    texts |= {f"extra{i}": text for i, text in enumerate(EXTRA)}
    return texts


def _primed_on() -> dict[str, Any]:
    """Where the cache was primed, from the manifest `harness cache prime` writes."""
    manifest = cache_path().parent.parent / "manifest.json"
    try:
        return dict(json.loads(manifest.read_text(encoding="utf-8")).get("primed_on", {}))
    except (OSError, ValueError):
        return {}


def test_cache_primed_elsewhere_gives_the_shared_ids(
    request: pytest.FixtureRequest, record_property: Any
) -> None:
    encoding = get_encoding()
    primed = _primed_on()
    record_property("tokenizer.primed_on", f"{primed.get('machine')}/{primed.get('byteorder')}")
    record_property("tokenizer.read_on", f"{host.machine()}/{sys.byteorder}")
    record_property(
        "tokenizer.cross_byte_order",
        str(bool(primed) and primed.get("byteorder") != sys.byteorder).lower(),
    )
    ids = {key: encoding.encode(text) for key, text in _texts().items()}
    for key, text in _texts().items():
        assert encoding.decode(ids[key]) == text, f"{key}: decode(encode(text)) != text"
    if request.config.getoption("--update-expectations"):
        lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(ids.items())]
        GOLDEN.write_text(f'{{"n_vocab": {encoding.n_vocab}, "ids": {{\n'
                          + ",\n".join(lines) + "\n}}\n")
        return
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert encoding.n_vocab == want["n_vocab"]
    differ = [key for key in want["ids"] if ids.get(key) != want["ids"][key]]
    assert not differ, (
        f"token ids differ from {GOLDEN.name} (recorded on another host) for {differ}: "
        f"the cache was primed on {primed or 'an unknown host'}, read on "
        f"{host.machine()}/{sys.byteorder}"
    )
