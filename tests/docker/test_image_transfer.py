"""An image carried to another agent as a file: `harness image build --save` writes what
`harness image load` brings back under the same content-hashed tag (the real engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import InfraError
from harness.platform.image_transfer import load, save


def test_a_saved_image_loads_back_under_its_tag(client: Any, tiny_image: str,
                                                tmp_path: Path) -> None:
    archive = tmp_path / "images" / "tiny.tar"
    size = save(client, tiny_image, archive)
    assert archive.is_file() and size == archive.stat().st_size > 1_000_000
    assert not list(archive.parent.glob(".*.part"))  # written whole, then renamed
    assert tiny_image in load(client, archive)


def test_a_missing_archive_or_tag_is_one_line(client: Any, tmp_path: Path) -> None:
    missing = tmp_path / "none.tar"
    try:
        load(client, missing)
    except InfraError as error:
        assert "did the image step upload it?" in str(error)
    else:
        raise AssertionError("loading a missing archive did not fail")
    try:
        save(client, "harness-no-such-image:0", tmp_path / "x.tar")
    except InfraError as error:
        assert str(error).startswith("docker save harness-no-such-image:0")
    else:
        raise AssertionError("saving a missing image did not fail")
    assert not (tmp_path / "x.tar").exists()
