"""``harness image``: build or reuse a matrix's image; list the harness's images."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("image", help="build or list platform images",
                       description="Build (or reuse, by content hash) a matrix's image, "
                       "or list the images the harness built.")
    isub = p.add_subparsers(dest="image_command", metavar="ACTION", required=True)
    b = isub.add_parser("build", help="build the matrix's image unless an identical one exists")
    b.add_argument("--matrix", required=True, help="matrix name or YAML path")
    b.add_argument("--log", type=Path, metavar="FILE", help="also write the build output here")
    b.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
    b.add_argument("--save", type=Path, metavar="FILE",
                   help="also write the image to FILE (docker save), for agents without it")
    b.set_defaults(func=_build)
    load = isub.add_parser("load", help="load an image written by `harness image build --save`")
    load.add_argument("file", type=Path, metavar="FILE")
    load.set_defaults(func=_load)
    ls = isub.add_parser("ls", help="list images built by the harness")
    ls.set_defaults(func=_ls)


def _build(args: argparse.Namespace) -> int:
    from harness.matrix import load_matrix
    from harness.platform import images
    from harness.roots import project_root

    start = time.monotonic()
    matrix = load_matrix(args.matrix)
    rcp, built = images.build(matrix, project_root(), log_path=args.log, force=args.force)
    what = "built" if built else "reused (cache hit)"
    print(f"image {rcp.tag} {what} for {matrix.name} from {rcp.base} "
          f"in {time.monotonic() - start:.1f} s")
    if args.save is not None:
        from harness.platform.image_transfer import save

        size = save(images.engine(), rcp.tag, args.save)
        print(f"image {rcp.tag} saved to {args.save} ({size / 1e6:.0f} MB)")
    return 0


def _load(args: argparse.Namespace) -> int:
    from harness.platform import images
    from harness.platform.image_transfer import load

    tags = load(images.engine(), args.file)
    print(f"loaded {', '.join(tags) or 'an untagged image'} from {args.file}")
    return 0


def _ls(args: argparse.Namespace) -> int:
    from harness.platform import images

    rows = images.list_images(images.engine())
    if not rows:
        print("no harness images (build one with: harness image build --matrix NAME)")
        return 0
    header = ("MATRIX", "TAG", "SIZE", "CREATED", "GIT")
    table = [header] + [(r["matrix"], r["tag"], f"{r['size_mb']:.0f} MB", r["created"],
                         r["git_sha"]) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                         .rstrip() + "\n")
    return 0
