"""An image carried between CI agents as a file: built once per build, loaded by each
shard (``harness image build --save FILE`` / ``harness image load FILE``), with no
registry. The tag is the recipe's content hash, so ``harness run --docker`` on the shard
finds the loaded image and builds nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import InfraError

if TYPE_CHECKING:
    import docker


def save(client: docker.DockerClient, tag: str, path: Path) -> int:
    """Write ``tag`` as a ``docker save`` archive; returns its size in bytes."""
    import docker.errors

    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        image = client.images.get(tag)
        with part.open("wb") as out:
            for chunk in image.save(named=True):
                out.write(chunk)
        os.replace(part, path)
    except docker.errors.DockerException as error:
        part.unlink(missing_ok=True)
        raise InfraError(f"docker save {tag}: {error}") from None
    except OSError as error:
        part.unlink(missing_ok=True)
        raise InfraError(f"{path}: cannot write the image ({error.strerror or error})") from None
    return path.stat().st_size


def load(client: docker.DockerClient, path: Path) -> list[str]:
    """Load a ``docker save`` archive; returns the tags it brought."""
    import docker.errors

    if not path.is_file():
        raise InfraError(f"{path}: no image archive (did the image step upload it?)")
    try:
        with path.open("rb") as archive:
            images = client.images.load(archive)
    except docker.errors.DockerException as error:
        raise InfraError(f"docker load {path}: {error}") from None
    return sorted(tag for image in images for tag in image.tags)
