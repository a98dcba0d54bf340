"""Pinned downloads for image builds, verified by sha256 before they enter a context.

Looked up, in order: ``$HARNESS_DOWNLOAD_MIRROR/<file name>`` (air-gapped agents keep
their vetted copies there), the harness's download cache (keyed by sha256, so a file is
fetched once per host), then the network. A file whose digest differs from the pin is
refused wherever it came from: the build stops and no image is tagged.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Protocol

from harness.digest import file_sha256
from harness.errors import InfraError


class Writer(Protocol):
    def write(self, text: str, /) -> object: ...


def cache_dir() -> Path:
    env = os.environ.get("HARNESS_DOWNLOAD_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "harness" / "downloads"


def _from_network(url: str, dest: Path) -> None:
    try:
        with urllib.request.urlopen(url, timeout=60) as response, dest.open("wb") as f:
            shutil.copyfileobj(response, f)
    except OSError as error:
        raise InfraError(f"download {url}: {error}") from None


def fetch_verified(url: str, sha256: str, dest: Path, *, matrix: str, out: Writer) -> None:
    """Put the file pinned by (url, sha256) at ``dest``, or raise InfraError."""
    name = Path(urllib.parse.urlparse(url).path).name or "download"
    cached = cache_dir() / sha256
    mirror = os.environ.get("HARNESS_DOWNLOAD_MIRROR")
    if mirror and (Path(mirror) / name).is_file():
        source, origin = Path(mirror) / name, f"mirror {mirror}"
    elif cached.is_file():
        source, origin = cached, "cache"
    else:
        cached.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cached.parent, prefix=".part-")
        os.close(fd)
        out.write(f"[image] downloading {url}\n")
        try:
            _from_network(url, Path(tmp))
            found = file_sha256(Path(tmp))
            if found != sha256:
                raise InfraError(f"image {matrix}: download {url}: sha256 mismatch: "
                                 f"expected {sha256}, got {found}; no image built")
            os.replace(tmp, cached)
        finally:
            Path(tmp).unlink(missing_ok=True)
        source, origin = cached, "network"
    found = file_sha256(source)
    if found != sha256:
        raise InfraError(f"image {matrix}: download {url} ({origin}): sha256 mismatch: "
                         f"expected {sha256}, got {found}; no image built")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)
    out.write(f"[image] {name}: sha256 verified ({origin})\n")
