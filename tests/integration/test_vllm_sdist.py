"""ci/vllm_upstream.py fetches vLLM's sdist through pip (the user's configuration: here a
wheel folder and no index) and keeps it only if its sha256 is the recorded one: a
mismatch is one line, exit 3, nothing kept."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from vllm_sources import upstream

ROOT = Path(__file__).resolve().parents[2]


def _fake_sdist(folder: Path, version: str) -> Path:
    """A tiny sdist named vllm, in a folder pip is pointed at (PIP_FIND_LINKS)."""
    src = folder / f"vllm-{version}"
    src.mkdir(parents=True)
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "vllm"\nversion = "{version}"\n[tool.setuptools]\npy-modules = []\n')
    archive = folder / "links" / f"vllm-{version}.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src, arcname=src.name)
    return archive


def test_a_sha256_that_does_not_match_keeps_nothing(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    links = _fake_sdist(tmp_path, "9.9.9").parent
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_DOWNLOAD_CACHE", str(cache))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")  # pip's inverted switch: no isolation
    fetch = upstream()
    with pytest.raises(fetch.SdistMismatch) as raised:
        fetch.sdist("9.9.9", "0" * 64)
    line = str(raised.value)
    assert "\n" not in line and "vllm-9.9.9.tar.gz: sha256 " in line and "nothing kept" in line
    assert not any(p.is_file() for p in cache.rglob("*"))
    good = fetch.file_sha256(links / "vllm-9.9.9.tar.gz")
    assert fetch.sdist("9.9.9", good) == cache / "vllm-9.9.9.tar.gz"


def test_the_script_exits_3_on_a_mismatch(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "vllm-0.32.0.tar.gz").write_bytes(b"not vLLM")  # a cached file is checked too
    env = {"HARNESS_DOWNLOAD_CACHE": str(cache), "PIP_NO_INDEX": "1",
           "PIP_FIND_LINKS": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, str(ROOT / "ci/vllm_upstream.py"), "--out",
                           str(tmp_path / "out")], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 3, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("vllm-upstream: error: pip download vllm==0.32.0 failed")
    assert not (tmp_path / "out" / "project" / "matrices").exists()
    assert not any(cache.iterdir())
