"""Image builds against the real engine: reuse by hash, refusal of a bad pin."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import ROOT, tiny_matrix

from harness.errors import InfraError
from harness.matrix.model import Download
from harness.platform import images


def test_second_build_is_a_cache_hit(client: Any, tiny_image: str) -> None:
    start = time.monotonic()
    rcp, built = images.build(tiny_matrix(), ROOT, out=io.StringIO(), client=client)
    assert (rcp.tag, built) == (tiny_image, False)
    assert time.monotonic() - start < 2
    labels = client.images.get(tiny_image).labels
    assert labels[images.LABEL_MATRIX] == "dockertest"
    assert labels[images.LABEL_RECIPE] == rcp.digest


def test_cli_lists_harness_images(tiny_image: str) -> None:
    out = subprocess.run([sys.executable, "-m", "harness", "image", "ls"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "MATRIX" in out and tiny_image in out


def test_sha256_mismatch_refused_nothing_tagged(client: Any, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "xpu-smi.deb").write_bytes(b"not the pinned file")
    monkeypatch.setenv("HARNESS_DOWNLOAD_MIRROR", str(mirror))
    m = tiny_matrix()
    pinned = hashlib.sha256(b"the pinned file").hexdigest()
    image = dataclasses.replace(m.image, downloads=(Download(
        url="https://example.invalid/xpu-smi.deb", sha256=pinned,
        dest="downloads/xpu-smi.deb"),))
    bad = dataclasses.replace(m, image=image)
    tag = images.recipe(bad, ROOT, client).tag
    with pytest.raises(InfraError) as err:
        images.build(bad, ROOT, out=io.StringIO(), client=client)
    assert err.value.exit_code == 3
    assert "sha256 mismatch" in str(err.value)
    assert images._image_id(client, tag) is None
