#!/usr/bin/env python3
"""Build the shipped BPE file from the project's own corpus, and its entry in encodings.json.

    python scripts/build_tokenizer.py            # rewrite refengine/data/*
    python scripts/build_tokenizer.py --check    # exit 1 if the shipped files differ

Same corpus, same bytes: the test suite rebuilds and compares.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from refengine.tokenizer import bpe  # noqa: E402
from refengine.tokenizer.spec import DATA_DIR, PAT_STR, SPECS_FILE  # noqa: E402

NAME = "refengine_bpe"
URL = f"https://harness.invalid/encodings/{NAME}.tiktoken"
MAX_MERGES = 1024


def build(corpus: Path = DATA_DIR / "corpus.txt") -> tuple[bytes, bytes]:
    """Return (bpe file bytes, encodings.json bytes)."""
    ranks = bpe.train(corpus.read_text(encoding="utf-8"), PAT_STR, MAX_MERGES)
    data = bpe.dumps(ranks)
    n = len(ranks)
    spec = {
        "encodings": [
            {
                "name": NAME,
                "url": URL,
                "file": f"{NAME}.tiktoken",
                "sha256": hashlib.sha256(data).hexdigest(),
                "pat_str": PAT_STR,
                "special_tokens": {"<|endoftext|>": n, "<|bos|>": n + 1},
                "n_vocab": n + 2,
            }
        ]
    }
    return data, (json.dumps(spec, indent=2, sort_keys=True) + "\n").encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    data, spec = build()
    targets = {DATA_DIR / f"{NAME}.tiktoken": data, SPECS_FILE: spec}
    if args.check:
        stale = [
            p for p, content in targets.items() if not p.is_file() or p.read_bytes() != content
        ]
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)} (rerun scripts/build_tokenizer.py)")
        return 1 if stale else 0
    for path, content in targets.items():
        path.write_bytes(content)
    print(f"{NAME}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
