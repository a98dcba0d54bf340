"""The persistent cache a matrix's suites read: tokenizer files, HF home, compiler cache.

One folder per matrix (``caches.root``), mounted at the same path inside and outside a
container, so no job ever downloads mid-test (a per-job temp cache caused exactly
that in the field). ``prime`` fills it from the files the project ships; ``verify``
says which file is missing or corrupt, one line each; ``cache_env`` gives the
variables that point every tokenizer loader at it.

Layout under the root:

    tiktoken/<sha1(url)>           tiktoken (TIKTOKEN_CACHE_DIR)
    tiktoken-rs/<sha1(url)>        openai-harmony (TIKTOKEN_RS_CACHE_DIR)
    encodings/<name>.tiktoken      openai-harmony (TIKTOKEN_ENCODINGS_BASE)
    hf/                            HF_HOME (with HF_HUB_OFFLINE=1)
    inductor/                      TORCHINDUCTOR_CACHE_DIR, kept between runs
    manifest.json                  sha256 of every file above; the machine and byte
                                   order that primed it (primed_on)
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from harness.digest import file_sha256
from harness.errors import ConfigError, InfraError

if TYPE_CHECKING:
    from harness.matrix.model import Matrix

MANIFEST = "manifest.json"
MANIFEST_SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class CacheFile:
    rel: str  # path under the cache root
    sha256: str
    source: Path  # the shipped file it is copied from
    purpose: str  # who reads it, for messages


def _data_dir() -> Path:
    # find_spec on a top-level package locates it without running its __init__
    # (which may import torch).
    spec = importlib.util.find_spec("refengine")
    if spec is None or not spec.submodule_search_locations:
        raise InfraError("cannot locate the refengine package (is harness installed?)")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


class _Encoding(TypedDict):
    """One entry of refengine/data/encodings.json, the fields the cache reads."""

    name: str
    file: str
    url: str
    sha256: str


def _encodings() -> list[_Encoding]:
    path = _data_dir() / "encodings.json"
    try:
        entries: list[_Encoding] = json.loads(path.read_text(encoding="utf-8"))["encodings"]
    except (OSError, ValueError, KeyError) as error:
        raise InfraError(f"{path}: cannot read the shipped encodings list: {error}") from error
    return entries


def cache_root(matrix: Matrix) -> Path:
    raw = matrix.caches.root
    expanded = os.path.expandvars(os.path.expanduser(raw))
    if "$" in expanded:
        raise ConfigError(
            f"{raw!r} names an environment variable that is not set",
            file=matrix.file,
            key="caches.root",
        )
    if not expanded.strip() or not Path(expanded).is_absolute():
        # A relative root would resolve against whatever folder the run starts in.
        raise ConfigError(
            f"{raw!r}: expected an absolute path (it may start with ~ or ${{VAR}})",
            file=matrix.file,
            key="caches.root",
        )
    return Path(expanded).absolute()


def planned_files(matrix: Matrix) -> list[CacheFile]:
    """Every file the suites of ``matrix`` read from the cache."""
    if not matrix.caches.tiktoken:
        return []
    files = []
    for enc in _encodings():
        key = hashlib.sha1(enc["url"].encode()).hexdigest()
        source = _data_dir() / enc["file"]
        name = enc["name"]
        files += [
            CacheFile(
                rel=f"tiktoken/{key}",
                sha256=enc["sha256"],
                source=source,
                purpose=f"{name} for TIKTOKEN_CACHE_DIR",
            ),
            CacheFile(
                rel=f"tiktoken-rs/{key}",
                sha256=enc["sha256"],
                source=source,
                purpose=f"{name} for TIKTOKEN_RS_CACHE_DIR",
            ),
            CacheFile(
                rel=f"encodings/{name}.tiktoken",
                sha256=enc["sha256"],
                source=source,
                purpose=f"{name} for TIKTOKEN_ENCODINGS_BASE",
            ),
        ]
    return files


def _write_atomic(path: Path, data: bytes) -> None:
    # Another job may read the cache while we prime it: never expose a half file.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def prime(matrix: Matrix) -> list[str]:
    """Fill the cache root; returns one line per file written (already-good files are kept)."""
    root = cache_root(matrix)
    written = []
    for item in planned_files(matrix):
        data = item.source.read_bytes()
        if hashlib.sha256(data).hexdigest() != item.sha256:
            raise InfraError(
                f"{item.source}: shipped file does not match encodings.json "
                f"(rerun scripts/build_tokenizer.py)"
            )
        target = root / item.rel
        if target.is_file() and file_sha256(target) == item.sha256:
            continue
        _write_atomic(target, data)
        written.append(f"wrote {target} ({item.purpose})")
    for folder in _folders(matrix):
        (root / folder).mkdir(parents=True, exist_ok=True)
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "matrix": matrix.name,
        "files": {item.rel: item.sha256 for item in planned_files(matrix)},
        # Containers of another architecture (s390x under qemu) read this cache: the
        # tokenizer suite records where it was written against where it is read.
        "primed_on": {"machine": platform.machine(), "byteorder": sys.byteorder},
    }
    _write_atomic(root / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
    return written


def _folders(matrix: Matrix) -> list[str]:
    return ["hf", "inductor"] if matrix.caches.hf else ["inductor"]


def problems(matrix: Matrix) -> list[str]:
    """One line per missing or corrupt cache file; empty when the cache is ready."""
    root = cache_root(matrix)
    found = []
    if not root.is_dir():
        return [f"cache root {root} does not exist"]
    expected: dict[str, str] = {item.rel: item.sha256 for item in planned_files(matrix)}
    manifest_path = root / MANIFEST
    try:
        recorded = json.loads(manifest_path.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError):
        found.append(f"missing or unreadable: {manifest_path}")
        recorded = {}
    for rel, sha in sorted(expected.items()):
        path = root / rel
        if not path.is_file():
            found.append(f"missing: {path}")
        elif (got := file_sha256(path)) != sha:
            found.append(f"corrupt: {path} (sha256 {got[:12]}..., expected {sha[:12]}...)")
    for rel, sha in sorted(recorded.items()):
        if rel in expected:
            continue
        path = root / rel
        if not path.is_file():
            found.append(f"missing: {path} (listed in {MANIFEST})")
        elif file_sha256(path) != sha:
            found.append(f"corrupt: {path} (listed in {MANIFEST})")
    found += [f"missing folder: {root / d}" for d in _folders(matrix) if not (root / d).is_dir()]
    return found


def verify(matrix: Matrix) -> None:
    """Raise InfraError (exit 3) listing every problem, with the command that fixes it."""
    found = problems(matrix)
    if found:
        # A user's matrix file keeps the name of the one it extends: name its file.
        shipped = matrix.file == f"matrices/{matrix.name}.yaml"
        which = matrix.name if shipped else matrix.file
        found.append(f"run `harness cache prime --matrix {which}`")
        raise InfraError(f"cache for matrix {matrix.name} is cold or corrupt:\n" + "\n".join(found))


def cache_env(matrix: Matrix) -> dict[str, str]:
    """Variables that point tiktoken, openai-harmony, HF and inductor at the cache."""
    root = cache_root(matrix)
    env: dict[str, str] = {"TORCHINDUCTOR_CACHE_DIR": str(root / "inductor")}
    if matrix.caches.tiktoken:
        env |= {
            "TIKTOKEN_CACHE_DIR": str(root / "tiktoken"),
            "TIKTOKEN_RS_CACHE_DIR": str(root / "tiktoken-rs"),
            "TIKTOKEN_ENCODINGS_BASE": str(root / "encodings"),
        }
    if matrix.caches.hf:
        env |= {"HF_HOME": str(root / "hf"), "HF_HUB_OFFLINE": "1"}
    extra: Mapping[str, str] = matrix.caches.env
    env |= {k: os.path.expandvars(str(v)) for k, v in extra.items()}
    return env
