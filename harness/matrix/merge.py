"""`extends:` chains and the key-by-key merge of a matrix onto its parent.

Rules (documented in docs/matrix.md and base.yaml):
- mappings merge key by key, recursively;
- any other value (lists included) replaces the parent's;
- a key written with a trailing ``+`` (``provides+: [x]``) appends its list to the
  parent's list instead of replacing it;
- ``name``, ``abstract`` and ``extends`` belong to one file and are never inherited.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path

from harness.errors import ConfigError, ConfigErrors
from harness.matrix.yamlsafe import LDict, LList, ldict, llist, read_yaml

APPEND = "+"
OWN_KEYS = ("name", "abstract", "extends")


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def merge(parent: LDict, child: LDict, errors: list[ConfigError], path: str = "") -> LDict:
    """Merge ``child`` onto ``parent``; both keep their locations. Never mutates either."""
    out = ldict(dict(parent), child.at, parent.loc)
    for key, value in child.items():
        where = child.where(key)
        if key.endswith(APPEND) and len(key) > 1:
            target = key[: -len(APPEND)]
            full = _join(path, key)
            if target in child:
                errors.append(
                    ConfigError(
                        f"use either {target} or {key}, not both",
                        file=where[0],
                        line=where[1],
                        key=full,
                    )
                )
                continue
            if not isinstance(value, list):
                errors.append(
                    ConfigError(
                        f"appends to a list, got a {type_name(value)}",
                        file=where[0],
                        line=where[1],
                        key=full,
                    )
                )
                continue
            base = parent.get(target, [])
            if not isinstance(base, list):
                errors.append(
                    ConfigError(
                        f"appends to a list, but the inherited {target} is a {type_name(base)}",
                        file=where[0],
                        line=where[1],
                        key=full,
                    )
                )
                continue
            base_loc = base.loc if isinstance(base, LList) else [where] * len(base)
            value_loc = value.loc if isinstance(value, LList) else [where] * len(value)
            out[target] = llist([*base, *value], where, [*base_loc, *value_loc])
            out.loc[target] = where
            continue
        old = parent.get(key)
        if isinstance(old, LDict) and isinstance(value, LDict):
            out[key] = merge(old, value, errors, _join(path, key))
        elif isinstance(value, LDict):
            out[key] = merge(ldict({}, value.at), value, errors, _join(path, key))
        else:
            out[key] = value
        out.loc[key] = where
    return out


class Chain:
    """The files of one matrix, root-most parent first, and their merge."""

    def __init__(self, files: list[tuple[str, LDict]], merged: LDict) -> None:
        self.files = files
        self.merged = merged

    @property
    def abstract_files(self) -> frozenset[str]:
        return frozenset(shown for shown, data in self.files if data.get("abstract") is True)


def _find_parent(value: str, child: Path, matrices_dir: Path) -> Path | None:
    name = value if value.endswith((".yaml", ".yml")) else value + ".yaml"
    candidate = child.parent / name
    if candidate.is_file():
        return candidate
    # A user's own matrix outside the checkout can extend a shipped one by name.
    if "/" not in name and (matrices_dir / name).is_file():
        return matrices_dir / name
    return None


def load_chain(path: Path, matrices_dir: Path, show: Callable[[Path], str]) -> Chain:
    """Read ``path`` and every file it extends; merge them; raise ConfigError(s)."""
    files: list[tuple[str, LDict]] = []
    seen: list[Path] = []
    current: Path | None = path
    while current is not None:
        shown = show(current)
        data = read_yaml(current, shown)
        if not isinstance(data, LDict):
            raise ConfigError(
                f"expected a mapping at the top level, got a {type_name(data)}", file=shown
            )
        seen.append(current.resolve())
        files.append((shown, data))
        parent = data.get("extends")
        if parent is None:
            break
        line = data.where("extends")[1]
        if not isinstance(parent, str) or not parent:
            raise ConfigError(
                f"expected a file name like 'base.yaml', got a {type_name(parent)}",
                file=shown,
                line=line,
                key="extends",
            )
        found = _find_parent(parent, current, matrices_dir)
        if found is None:
            choices = sorted(
                {p.name for folder in (current.parent, matrices_dir) for p in folder.glob("*.yaml")}
            )
            near = difflib.get_close_matches(parent, choices, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise ConfigError(f"no such file {parent}{hint}", file=shown, line=line, key="extends")
        if found.resolve() in seen:
            loop = " -> ".join([*(show(p) for p in seen), show(found)])
            raise ConfigError(f"cycle: {loop}", file=shown, line=line, key="extends")
        current = found
    files.reverse()
    errors: list[ConfigError] = []
    merged = ldict({}, (files[-1][0], None))
    for shown, data in files:
        own = {key: data[key] for key in OWN_KEYS if key in data}
        inherited = ldict(
            {k: v for k, v in merged.items() if k not in OWN_KEYS},
            (shown, None),
            {k: v for k, v in merged.loc.items() if k not in OWN_KEYS},
        )
        merged = merge(inherited, data, errors)
        merged.at = (shown, None)
        for key in OWN_KEYS:
            if key not in own:
                merged.pop(key, None)
                merged.loc.pop(key, None)
    if errors:
        raise errors[0] if len(errors) == 1 else ConfigErrors(errors)
    return Chain(files, merged)
