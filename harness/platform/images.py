"""Image recipes -> content-hashed tags; build or reuse.

The tag is the hash of the recipe and every input (Dockerfile and the files beside it,
build args, pins, pinned downloads, the base image and its id), so an unchanged recipe
is found at once without resolving any package, and a changed input builds a new image.
Python packages are resolved on the host into a wheelhouse inside the build context
and installed offline in the image: air-gapped agents need exactly that, and a proxy's
certificate authority never has to enter an image.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypedDict

from harness.digest import file_sha256
from harness.errors import ConfigError, InfraError
from harness.platform.gitinfo import head_sha
from harness.platform.images_fetch import Writer, fetch_verified
from harness.process.run import run_captured
from harness.roots import base_of, locate

if TYPE_CHECKING:
    import docker

    from harness.matrix.model import Matrix

LABEL_MATRIX = "org.harness.matrix"
LABEL_RECIPE = "org.harness.recipe-hash"
LABEL_MATRIX_HASH = "org.harness.matrix-hash"
LABEL_GIT = "org.harness.git-sha"
GENERATED = ("harness-requirements.txt", "wheelhouse", "Dockerfile")
RECIPE_VERSION = "1"  # bump when the way a context is assembled changes
# What the harness itself needs inside every image (the plugin, per-test timeouts,
# workers), pinned to the host's versions so both sides agree. True = pure python,
# so it can be resolved for another architecture too; the s390x base brings Debian's
# python3-yaml instead.
HARNESS_PINS = {"pytest": True, "pytest-timeout": True, "pytest-xdist": True, "pyyaml": False}

PIP_TIMEOUT_S = 3600.0


@dataclass(frozen=True, kw_only=True)
class Recipe:
    matrix: str
    dockerfile: Path
    recipe_dir: Path
    base: str
    base_id: str | None
    build_args: dict[str, str]
    requirements: tuple[str, ...]
    downloads: tuple[tuple[str, str, str], ...]  # (url, sha256, dest)
    platform: str | None
    digest: str
    tag: str


def engine() -> docker.DockerClient:
    """A client for the local engine, or InfraError saying how to get one."""
    import docker

    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as error:  # the SDK raises DockerException, requests or OS errors
        raise InfraError(
            f"docker: no engine answers ({type(error).__name__}); start one with "
            "ci/bootstrap-docker.sh"
        ) from None
    return client


def _image_id(client: docker.DockerClient | None, name: str) -> str | None:
    if client is None:
        return None
    import docker.errors

    try:
        return str(client.images.get(name).id)
    except docker.errors.ImageNotFound:
        return None


def choose_base(matrix: Matrix, client: docker.DockerClient | None) -> tuple[str, str | None]:
    """The base to build from: the registry base if present, else the local stand-in.

    Hosts without a registry bootstrap ``image.local_base`` (ci/make-base-image.sh);
    when neither is present the build pulls ``image.base``.
    """
    base = matrix.image.base
    if not base:
        raise ConfigError("image.base is not set", file=matrix.file, key="image.base")
    base_id = _image_id(client, base)
    if base_id is None and matrix.image.local_base:
        local_id = _image_id(client, matrix.image.local_base)
        if local_id is not None:
            return matrix.image.local_base, local_id
    return base, base_id


def _recipe_files(recipe_dir: Path) -> Iterator[Path]:
    for path in sorted(recipe_dir.rglob("*")):
        rel = path.relative_to(recipe_dir)
        if rel.parts[0] in ("context", "__pycache__") or not path.is_file():
            continue
        yield path


def recipe(matrix: Matrix, root: Path, client: docker.DockerClient | None) -> Recipe:
    """Compute the recipe and its tag; cheap (no package resolution, no download)."""
    if not matrix.image.dockerfile:
        raise ConfigError(f"{matrix.name} has no image.dockerfile", file=matrix.file,
                          key="image.dockerfile")
    # The project's recipe, else the shipped one (an installed harness).
    dockerfile = locate(matrix.image.dockerfile, root).resolve()
    if not dockerfile.is_file():
        raise ConfigError(f"image.dockerfile {matrix.image.dockerfile} does not exist",
                          file=matrix.file, key="image.dockerfile")
    base, base_id = choose_base(matrix, client)
    build_args = {**dict(matrix.image.build_args), "BASE": base}
    recipe_rel = dockerfile.parent.relative_to(base_of(dockerfile, root).resolve()).as_posix() + "/"
    # dest is relative to the build context; a repository-relative path into the
    # recipe folder means the same place.
    downloads = tuple((d.url, d.sha256, d.dest.removeprefix(recipe_rel))
                      for d in matrix.image.downloads)
    h = hashlib.sha256()
    for path in _recipe_files(dockerfile.parent):
        h.update(str(path.relative_to(dockerfile.parent)).encode() + b"\0")
        h.update(bytes.fromhex(file_sha256(path)))
    meta = {
        "v": RECIPE_VERSION,
        "dockerfile": dockerfile.name,
        "args": build_args,
        "base_id": base_id,
        "requirements": list(matrix.python.requirements),
        "harness_pins": harness_pins(native=True),
        "downloads": downloads,
        "platform": matrix.runtime.platform,
    }
    h.update(json.dumps(meta, sort_keys=True).encode())
    digest = h.hexdigest()
    prefix = matrix.image.tag_prefix or "harness"
    return Recipe(
        matrix=matrix.name, dockerfile=dockerfile, recipe_dir=dockerfile.parent, base=base,
        base_id=base_id, build_args=build_args, requirements=tuple(matrix.python.requirements),
        downloads=downloads, platform=matrix.runtime.platform, digest=digest,
        tag=f"{prefix}-{matrix.name}:{digest[:16]}",
    )


def harness_pins(*, native: bool) -> list[str]:
    pins = []
    for name, pure in HARNESS_PINS.items():
        if not (pure or native):
            continue
        try:
            pins.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            pins.append(name)
    return pins


def git_sha(root: Path) -> str:
    return head_sha(root) or "unknown"


def _base_python(client: docker.DockerClient, base: str) -> tuple[str, str]:
    """(major.minor, machine) of python3 in the base: the wheelhouse must match it."""
    code = "import platform,sys;print('%d.%d'%sys.version_info[:2],platform.machine())"
    try:
        out = client.containers.run(base, ["python3", "-c", code], network_mode="none",
                                    remove=True, stdout=True, stderr=True)
    except Exception as error:
        raise InfraError(f"image: cannot run python3 in base {base}: {error}") from None
    version, machine = out.decode().split()
    return version, machine


def _wheelhouse(rcp: Recipe, context: Path, client: docker.DockerClient,
                out: Writer) -> None:
    """Resolve the pins with the host's pip into ``context/wheelhouse``.

    pip itself goes in too: a base without pip (Debian's s390x rootfs) runs it from
    its wheel.
    """
    wheelhouse = context / "wheelhouse"
    wheelhouse.mkdir()
    version, machine = _base_python(client, rcp.base)
    host = f"{sys.version_info[0]}.{sys.version_info[1]}"
    native = (version, machine) == (host, os.uname().machine)
    req = context / "harness-requirements.txt"
    lines = [*rcp.requirements, *harness_pins(native=native)]
    req.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    pip = [sys.executable, "-m", "pip"]
    if native:
        cmd = [*pip, "wheel", "--wheel-dir", str(wheelhouse), "-r", str(req), "pip"]
    else:
        # Another interpreter or architecture: binary wheels for it (pure ones match).
        cmd = [*pip, "download", "--dest", str(wheelhouse), "--only-binary=:all:",
               "--python-version", version, "--implementation", "cp", "-r", str(req), "pip"]
        for tag in (f"manylinux_2_28_{machine}", f"manylinux2014_{machine}",
                    f"linux_{machine}"):
            cmd += ["--platform", tag]
    out.write(f"[image] $ {' '.join(cmd)}\n")
    proc = run_captured(cmd, timeout_s=PIP_TIMEOUT_S)  # a hung index is an error, not a hang
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-5:]
        raise InfraError(f"image {rcp.matrix}: pip could not resolve the pins: "
                         + " | ".join(tail))


def with_labels(dockerfile: Path, labels: dict[str, str]) -> None:
    """Put the labels right after the last FROM: as a final step (what the API's
    ``labels`` does) they would copy the finished image once more on vfs."""
    lines = dockerfile.read_text(encoding="utf-8").splitlines()
    last_from = max(i for i, line in enumerate(lines)
                    if line.strip().upper().startswith("FROM "))
    label = "LABEL " + " ".join(f"{json.dumps(k)}={json.dumps(v)}" for k, v in labels.items())
    lines.insert(last_from + 1, label)
    dockerfile.write_text("\n".join(lines) + "\n", encoding="utf-8")


def assemble_context(rcp: Recipe, context: Path, client: docker.DockerClient,
                     out: Writer, labels: dict[str, str]) -> None:
    """Fill ``context``: recipe files, verified downloads, the wheelhouse."""
    if context.exists():
        shutil.rmtree(context)
    context.mkdir(parents=True)
    for path in _recipe_files(rcp.recipe_dir):
        dest = context / path.relative_to(rcp.recipe_dir)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
    with_labels(context / rcp.dockerfile.name, labels)
    # Downloads first: a bad pin must fail before minutes of package resolution.
    for url, sha256, rel in rcp.downloads:
        fetch_verified(url, sha256, context / rel, matrix=rcp.matrix, out=out)
    _wheelhouse(rcp, context, client, out)


def build(matrix: Matrix, root: Path, *, log_path: Path | None = None,
          out: TextIO = sys.stdout, force: bool = False,
          client: docker.DockerClient | None = None) -> tuple[Recipe, bool]:
    """Build or reuse the matrix's image; returns (recipe, built)."""
    client = client or engine()
    rcp = recipe(matrix, root, client)
    if not force and _image_id(client, rcp.tag) is not None:
        return rcp, False
    context = root / ".harness-cache" / "build" / matrix.name
    log = log_path.open("a", encoding="utf-8") if log_path else None
    try:
        tee = _Tee(out, log)
        labels = {LABEL_MATRIX: matrix.name, LABEL_RECIPE: rcp.digest,
                  LABEL_MATRIX_HASH: matrix.hash, LABEL_GIT: git_sha(root)}
        assemble_context(rcp, context, client, tee, labels)
        _stream_build(client, rcp, context, tee)
    finally:
        if log is not None:
            log.close()
    return rcp, True


class _Tee:
    """Writes each line to the terminal and the log file."""

    def __init__(self, out: TextIO, log: TextIO | None) -> None:
        self.out, self.log = out, log

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        if self.log is not None:
            self.log.write(text)
            self.log.flush()


class _PullOptions(TypedDict, total=False):
    """What ``docker build`` is given only when it pulls the base image."""

    platform: str


def _stream_build(client: docker.DockerClient, rcp: Recipe, context: Path,
                  out: _Tee) -> None:
    start = time.monotonic()
    kwargs: _PullOptions = {}
    if rcp.platform and rcp.base_id is None:
        kwargs["platform"] = rcp.platform  # only a pull needs it (see docker.py)
    network = os.environ.get("HARNESS_BUILD_NETWORK", "host")
    pending = ""
    error: str | None = None
    try:
        for chunk in client.api.build(
            path=str(context), dockerfile=rcp.dockerfile.name, tag=rcp.tag,
            buildargs=rcp.build_args, rm=True, forcerm=True, pull=False,
            network_mode=network, decode=True, **kwargs,
        ):
            if "error" in chunk:
                error = str(chunk.get("errorDetail", {}).get("message") or chunk["error"])
            text = str(chunk.get("stream", ""))
            if not text:
                continue
            pending += text
            *lines, pending = pending.split("\n")
            for line in lines:
                if line.strip():
                    out.write(f"[image] {line.rstrip()}\n")
    except Exception as error_:  # APIError, connection errors while streaming
        error = f"{type(error_).__name__}: {error_}"
    if pending.strip():
        out.write(f"[image] {pending.rstrip()}\n")
    if error:
        raise InfraError(f"image {rcp.matrix}: build failed: {error.strip()}")
    out.write(f"[image] built {rcp.tag} in {time.monotonic() - start:.1f} s\n")


class ImageRow(TypedDict):
    """One harness image, as ``harness image ls`` lists it."""

    matrix: str
    tag: str
    size_mb: float
    created: str
    git_sha: str


def list_images(client: docker.DockerClient) -> list[ImageRow]:
    rows: list[ImageRow] = []
    for image in client.images.list(filters={"label": LABEL_MATRIX}):
        attrs = image.attrs
        tags: Sequence[str] = image.tags or ["<none>"]
        rows.append({
            "matrix": image.labels.get(LABEL_MATRIX, "?"),
            "tag": tags[0],
            "size_mb": round(int(attrs.get("Size", 0)) / 1e6, 1),
            "created": str(attrs.get("Created", ""))[:19].replace("T", " "),
            "git_sha": image.labels.get(LABEL_GIT, "")[:12],
        })
    return sorted(rows, key=lambda r: (r["matrix"], r["created"]), reverse=False)
