"""The shipped BPE file: reproducible build, round trips, strict offline loading."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from refengine.tokenizer import TokenizerCacheError, get_encoding, load_specs
from refengine.tokenizer.encoding import cache_key

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build_tokenizer.py"


def _load_build_script():  # the script is not a package module
    spec = importlib.util.spec_from_file_location("build_tokenizer", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def primed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    spec = load_specs()["refengine_bpe"]
    cache = tmp_path / "tiktoken"
    cache.mkdir()
    shutil.copy(spec.source, cache / cache_key(spec.url))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    return cache


def test_rebuild_gives_the_shipped_bytes() -> None:
    build = _load_build_script()
    data, specs_json = build.build()
    spec = load_specs()["refengine_bpe"]
    assert data == spec.source.read_bytes()
    assert hashlib.sha256(data).hexdigest() == spec.sha256
    assert specs_json == (spec.source.parent / "encodings.json").read_bytes()


def test_build_depends_on_the_corpus(tmp_path: Path) -> None:
    build = _load_build_script()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("other words, other merges. " * 20, encoding="utf-8")
    data, _ = build.build(corpus)
    assert data != load_specs()["refengine_bpe"].source.read_bytes()
    assert build.build(corpus)[0] == data


def test_round_trip(primed: Path) -> None:
    enc = get_encoding()
    for text in [
        "The engine decodes one token at a time.",
        "unseen: Zürich, 東京, emoji 🚀, tabs\tand\nnewlines 12345",
        "",
    ]:
        ids = enc.encode(text)
        assert enc.decode(ids) == text
    common = enc.encode(" the cache")
    assert len(common) <= 3  # learned merges are in use, not single bytes
    assert enc.encode("<|endoftext|>", allowed_special="all") == [enc.eot_token]
    assert enc.n_vocab == load_specs()["refengine_bpe"].special_tokens["<|bos|>"] + 1


def test_cold_cache_fails_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(TokenizerCacheError, match=r"cold: .* `harness cache prime"):
        get_encoding()


def test_unset_cache_dir_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    with pytest.raises(TokenizerCacheError, match="TIKTOKEN_CACHE_DIR is not set"):
        get_encoding()


def test_corrupt_cache_is_reported_and_kept(primed: Path) -> None:
    path = next(primed.iterdir())
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(TokenizerCacheError, match="corrupt"):
        get_encoding()
    assert path.exists()  # tiktoken would delete it and try to download; we must not


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_loads_with_the_network_off(primed: Path) -> None:
    code = (
        "import socket\n"
        "from refengine.tokenizer import get_encoding\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 443), timeout=2)\n"
        "    raise SystemExit('network is reachable')\n"
        "except OSError:\n"
        "    pass\n"
        "enc = get_encoding()\n"
        "print(enc.decode(enc.encode('offline ok')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -n not permitted here: {probe.stderr.decode().strip()}")
    out = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "offline ok"
