"""``harness cache prime|verify --matrix X``: fill or check a matrix's persistent cache."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("cache", help="prime or verify the persistent caches")
    actions = parser.add_subparsers(dest="cache_action", metavar="ACTION", required=True)
    prime = actions.add_parser("prime", help="fill the cache root from the shipped files")
    prime.add_argument("--matrix", required=True, help="matrix name or path")
    prime.set_defaults(func=run_prime)
    verify = actions.add_parser("verify", help="report missing or corrupt cache files (exit 3)")
    verify.add_argument("--matrix", default="cpu", help="matrix name or path (default: cpu)")
    verify.set_defaults(func=run_verify)
    prune = actions.add_parser(
        "prune",
        help="remove environments no matrix uses (and, with --older-than, unused ones)",
        description="Remove the per-pins environments under the cache root that no matrix of "
        "this project or the shipped ones uses (old pins, unfinished builds); with "
        "--older-than DAYS also those not used for that long.",
    )
    prune.add_argument("--older-than", type=float, metavar="DAYS", help="also remove by age")
    prune.add_argument("--dry-run", action="store_true", help="list; remove nothing")
    prune.set_defaults(func=run_prune)


def run_prime(args: argparse.Namespace) -> int:
    from harness.matrix import load_matrix
    from harness.platform import cache

    matrix = load_matrix(args.matrix)
    for line in cache.prime(matrix):
        print(line)
    cache.verify(matrix)
    print(f"cache for matrix {matrix.name} is ready: {cache.cache_root(matrix)}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from harness.matrix import load_matrix
    from harness.platform import cache

    matrix = load_matrix(args.matrix)
    cache.verify(matrix)
    print(f"cache for matrix {matrix.name} is ready: {cache.cache_root(matrix)}")
    return 0


def run_prune(args: argparse.Namespace) -> int:
    from harness.matrix import list_matrices, load_matrix
    from harness.platform.cache import cache_root
    from harness.run.venvs import folder_size, in_use, prune

    matrices = [load_matrix(name) for name in list_matrices()]
    roots = sorted({cache_root(m) for m in matrices})
    freed = 0
    for root in roots:
        keep = in_use([m for m in matrices if cache_root(m) == root], root)
        sizes = {}
        if args.dry_run:
            removed = prune(root, keep, older_than_days=args.older_than, dry_run=True)
            sizes = {folder: folder_size(folder) for folder, _ in removed}
        else:
            listed = prune(root, keep, older_than_days=args.older_than, dry_run=True)
            sizes = {folder: folder_size(folder) for folder, _ in listed}
            removed = prune(root, keep, older_than_days=args.older_than, dry_run=False)
        for folder, why in removed:
            freed += sizes.get(folder, 0)
            verb = "would remove" if args.dry_run else "removed"
            print(f"{verb} {folder} ({why}; {sizes.get(folder, 0) / 2**20:.0f} MiB)")
    verb = "would free" if args.dry_run else "freed"
    print(f"harness cache prune: {verb} {freed / 2**20:.0f} MiB")
    return 0
