"""harness.platform.cache: prime, verify (missing / corrupt, one line each), cache_env."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.errors import ConfigError, InfraError
from harness.matrix.model import Caches
from harness.platform import cache


def _matrix(root: str, **caches: object) -> SimpleNamespace:
    # cache.py reads only name, file and caches; Caches is the real model class.
    return SimpleNamespace(name="cpu", file="matrices/cpu.yaml", caches=Caches(root=root, **caches))


@pytest.fixture
def matrix(tmp_path: Path) -> SimpleNamespace:
    return _matrix(str(tmp_path / "cache"))


def test_prime_writes_every_naming(matrix: SimpleNamespace, tmp_path: Path) -> None:
    lines = cache.prime(matrix)
    root = tmp_path / "cache"
    url = "https://harness.invalid/encodings/refengine_bpe.tiktoken"
    key = hashlib.sha1(url.encode()).hexdigest()
    for rel in (f"tiktoken/{key}", f"tiktoken-rs/{key}", "encodings/refengine_bpe.tiktoken"):
        assert (root / rel).is_file(), rel
    assert (root / "hf").is_dir() and (root / "inductor").is_dir()
    manifest = json.loads((root / "manifest.json").read_text())
    assert set(manifest["files"]) == {
        f"tiktoken/{key}",
        f"tiktoken-rs/{key}",
        "encodings/refengine_bpe.tiktoken",
    }
    assert len(lines) == 3
    assert cache.problems(matrix) == []
    assert cache.prime(matrix) == []  # idempotent: good files are kept


def test_verify_names_each_bad_file(matrix: SimpleNamespace, tmp_path: Path) -> None:
    cache.prime(matrix)
    root = tmp_path / "cache"
    corrupt = next((root / "tiktoken").iterdir())
    corrupt.write_bytes(b"garbage")
    missing = root / "encodings" / "refengine_bpe.tiktoken"
    missing.unlink()
    found = cache.problems(matrix)
    assert len(found) == 2
    assert found[0] == f"missing: {missing}"
    assert found[1].startswith(f"corrupt: {corrupt} (sha256 ")
    with pytest.raises(InfraError) as error:
        cache.verify(matrix)
    assert error.value.exit_code == 3
    assert str(error.value).splitlines()[-1] == "run `harness cache prime --matrix cpu`"
    cache.prime(matrix)  # priming repairs it
    assert cache.problems(matrix) == []


def test_cold_cache(matrix: SimpleNamespace, tmp_path: Path) -> None:
    assert cache.problems(matrix) == [f"cache root {tmp_path / 'cache'} does not exist"]
    (tmp_path / "cache").mkdir()
    found = cache.problems(matrix)
    assert found[0].startswith("missing or unreadable: ") and len(found) == 6


def test_root_expands_home_and_vars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_TEST_CACHE", str(tmp_path))
    assert cache.cache_root(_matrix("${HARNESS_TEST_CACHE}/c")) == tmp_path / "c"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache.cache_root(_matrix("~/x")) == tmp_path / "x"
    monkeypatch.delenv("HARNESS_TEST_CACHE")
    with pytest.raises(ConfigError, match=r"matrices/cpu.yaml: caches.root: .* not set"):
        cache.cache_root(_matrix("${HARNESS_TEST_CACHE}/c"))


def test_cache_env(matrix: SimpleNamespace, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    env = cache.cache_env(_matrix(str(root), env={"HF_DATASETS_OFFLINE": "1"}))
    assert env == {
        "TIKTOKEN_CACHE_DIR": str(root / "tiktoken"),
        "TIKTOKEN_RS_CACHE_DIR": str(root / "tiktoken-rs"),
        "TIKTOKEN_ENCODINGS_BASE": str(root / "encodings"),
        "HF_HOME": str(root / "hf"),
        "HF_HUB_OFFLINE": "1",
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
        "HF_DATASETS_OFFLINE": "1",
    }
    assert "TIKTOKEN_CACHE_DIR" not in cache.cache_env(_matrix(str(root), tiktoken=False))


def test_primed_cache_serves_the_tokenizer(matrix: SimpleNamespace) -> None:
    cache.prime(matrix)
    env = {**os.environ, **cache.cache_env(matrix)}
    code = "from refengine.tokenizer import get_encoding; print(get_encoding().n_vocab)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 256
