"""Test ids shortened to what differs between the rows of one grid.

``suites/kernel_parity/test_parity.py::test_parity[linear-...]`` in a grid where every
row lives under ``suites/kernel_parity/`` shows as ``test_parity.py::test_parity[linear-...]``;
long parameter ids are cut in the middle. The full id stays on the row (its title).
"""

from __future__ import annotations

from collections.abc import Iterable

PARAMS_LIMIT = 48


def _split(key: str) -> tuple[list[str], str]:
    path, sep, rest = key.partition("::")
    if not sep:
        return [], key
    return path.split("/"), rest


def _common_dirs(paths: list[list[str]]) -> int:
    if not paths:
        return 0
    dirs = [p[:-1] for p in paths]
    count = 0
    for parts in zip(*dirs, strict=False):
        if len(set(parts)) != 1:
            break
        count += 1
    return min(count, min(len(d) for d in dirs))


def _cut(params: str, limit: int) -> str:
    if len(params) <= limit:
        return params
    half = (limit - 1) // 2
    return f"{params[:half]}…{params[-half:]}"


def shorten(keys: Iterable[str], *, limit: int = PARAMS_LIMIT) -> dict[str, str]:
    """key -> its short form (unique across ``keys`` whenever the keys are)."""
    keys = list(keys)
    split = {key: _split(key) for key in keys}
    # Ids without a folder (foreign JUnit, a crash record) neither share nor block a prefix.
    common = _common_dirs([path for path, _ in split.values() if len(path) > 1])
    out: dict[str, str] = {}
    for key, (path, rest) in split.items():
        name, bracket, params = rest.partition("[")
        params = params[:-1] if params.endswith("]") else params
        folder = path[common:] if len(path) > 1 else path
        shown = "/".join(folder) + "::" + name if path else name
        out[key] = f"{shown}[{_cut(params, limit)}]" if bracket else shown
    # Cutting parameters may make two rows look alike: keep those whole.
    seen: dict[str, list[str]] = {}
    for key, short in out.items():
        seen.setdefault(short, []).append(key)
    for clash in (group for group in seen.values() if len(group) > 1):
        for key in clash:
            path, rest = split[key]
            folder = path[common:] if len(path) > 1 else path
            out[key] = "/".join(folder) + "::" + rest if path else rest
    return out


def leaf(key: str) -> str:
    """The test's own name with its parameters: what follows the last ``::``."""
    return key.rsplit("::", 1)[-1]
