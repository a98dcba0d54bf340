"""``harness cache prime|verify --matrix X``: fill or check a matrix's persistent cache."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("cache", help="prime or verify the persistent caches")
    actions = parser.add_subparsers(dest="cache_action", metavar="ACTION", required=True)
    prime = actions.add_parser("prime", help="fill the cache root from the shipped files")
    prime.add_argument("--matrix", required=True, help="matrix name or path")
    prime.set_defaults(func=run_prime)
    verify = actions.add_parser("verify", help="report missing or corrupt cache files (exit 3)")
    verify.add_argument("--matrix", default="cpu", help="matrix name or path (default: cpu)")
    verify.set_defaults(func=run_verify)


def run_prime(args: argparse.Namespace) -> int:
    from harness import cache
    from harness.matrix import load_matrix

    matrix = load_matrix(args.matrix)
    for line in cache.prime(matrix):
        print(line)
    cache.verify(matrix)
    print(f"cache for matrix {matrix.name} is ready: {cache.cache_root(matrix)}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from harness import cache
    from harness.matrix import load_matrix

    matrix = load_matrix(args.matrix)
    cache.verify(matrix)
    print(f"cache for matrix {matrix.name} is ready: {cache.cache_root(matrix)}")
    return 0
