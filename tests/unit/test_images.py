"""Image tags follow their inputs; pinned downloads are verified before use."""

from __future__ import annotations

import dataclasses
import hashlib
import io
from pathlib import Path

import pytest

from harness.errors import InfraError
from harness.matrix import load_matrix
from harness.matrix.model import Download
from harness.platform import images
from harness.platform.images_fetch import fetch_verified
from harness.roots import project_root

ROOT = project_root().resolve()


def test_tag_is_stable_and_follows_every_input(tmp_path: Path) -> None:
    m = load_matrix("cpu", ROOT)
    first = images.recipe(m, ROOT, None)
    assert first.tag == images.recipe(m, ROOT, None).tag
    assert first.tag.startswith("harness-cpu:")
    pins = dataclasses.replace(m.python, requirements=(*m.python.requirements, "rich"))
    assert images.recipe(dataclasses.replace(m, python=pins), ROOT, None).tag != first.tag
    args = dataclasses.replace(m.image, build_args={"X": "1"})
    assert images.recipe(dataclasses.replace(m, image=args), ROOT, None).tag != first.tag
    dl = dataclasses.replace(m.image, downloads=(Download(url="https://h/x.deb", sha256="0" * 64,
                                                          dest="downloads/x.deb"),))
    assert images.recipe(dataclasses.replace(m, image=dl), ROOT, None).tag != first.tag
    # A changed file beside the Dockerfile changes the tag too.
    recipe_dir = tmp_path / "images" / "cpu"
    recipe_dir.mkdir(parents=True)
    (recipe_dir / "Dockerfile").write_text((ROOT / "images/cpu/Dockerfile").read_text())
    before = images.recipe(m, tmp_path, None).tag
    (recipe_dir / "extra.sh").write_text("echo hi\n")
    assert images.recipe(m, tmp_path, None).tag != before


def test_labels_go_right_after_the_last_from(tmp_path: Path) -> None:
    df = tmp_path / "Dockerfile"
    df.write_text("ARG BASE=x\nFROM a AS build\nRUN true\nFROM ${BASE}\nCMD [\"x\"]\n")
    images.with_labels(df, {"org.harness.matrix": "cpu"})
    assert df.read_text().splitlines()[4] == 'LABEL "org.harness.matrix"="cpu"'


def test_fetch_verified_from_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "tool.deb").write_bytes(b"payload")
    monkeypatch.setenv("HARNESS_DOWNLOAD_MIRROR", str(mirror))
    monkeypatch.setenv("HARNESS_DOWNLOAD_CACHE", str(tmp_path / "cache"))
    good = hashlib.sha256(b"payload").hexdigest()
    dest = tmp_path / "ctx" / "downloads" / "tool.deb"
    fetch_verified("https://example.invalid/r/tool.deb", good, dest, matrix="xpu",
                   out=io.StringIO())
    assert dest.read_bytes() == b"payload"


def test_fetch_refuses_a_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "tool.deb").write_bytes(b"swapped")
    monkeypatch.setenv("HARNESS_DOWNLOAD_MIRROR", str(mirror))
    dest = tmp_path / "ctx" / "tool.deb"
    with pytest.raises(InfraError) as err:
        fetch_verified("https://example.invalid/r/tool.deb", "a" * 64, dest, matrix="xpu",
                       out=io.StringIO())
    assert err.value.exit_code == 3
    assert "sha256 mismatch" in str(err.value) and "\n" not in str(err.value)
    assert not dest.exists()
