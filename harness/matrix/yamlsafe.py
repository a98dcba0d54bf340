"""Safe YAML reading for matrix files: plain types only, with file:line for every key.

PyYAML's SafeLoader already refuses to build Python objects, but it accepts duplicate
keys silently (the last one wins), shares aliased nodes (so a "billion laughs" file
explodes only later, in whatever walks the tree) and forgets where each key was. The
loader here checks the composed node graph first, then builds dicts and lists that
remember the file and line of each key and item.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from harness.errors import ConfigError, ConfigErrors

MAX_BYTES = 1 << 20
# Nodes after expanding every alias; the largest shipped matrix has under 2,000.
MAX_NODES = 100_000

Loc = tuple[str, int | None]

_PLAIN_TAGS = frozenset(
    "tag:yaml.org,2002:" + name
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
)

# YAML 1.1 (PyYAML) reads 1e-5 as a string; tolerances are written that way.
_FLOAT_12 = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


class LDict(dict[str, object]):
    """A mapping that remembers where it and each of its keys were written."""

    at: Loc
    loc: dict[str, Loc]

    def where(self, key: str) -> Loc:
        return self.loc.get(key, self.at)


class LList(list[object]):
    """A sequence that remembers where it and each of its items were written."""

    at: Loc
    loc: list[Loc]

    def where(self, index: int) -> Loc:
        return self.loc[index] if 0 <= index < len(self.loc) else self.at


def ldict(items: Mapping[str, object], at: Loc, loc: dict[str, Loc] | None = None) -> LDict:
    out = LDict(items)
    out.at = at
    out.loc = dict(loc or {})
    return out


def llist(items: Iterable[object], at: Loc, loc: list[Loc] | None = None) -> LList:
    out = LList(items)
    out.at = at
    out.loc = list(loc or [])
    return out


class _Located(SafeConstructor, Resolver):
    """The constructors that build LDict / LList and the float resolver, registered
    below; mixed in before a SafeLoader class, whose parser does the rest."""

    display: str = "<yaml>"


def _construct_located_map(
    loader: MatrixSafeLoader | MatrixCSafeLoader, node: yaml.MappingNode
) -> LDict:
    out = ldict({}, (loader.display, node.start_mark.line + 1))
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        out[key] = loader.construct_object(value_node, deep=True)
        out.loc[key] = (loader.display, key_node.start_mark.line + 1)
    return out


def _construct_located_seq(
    loader: MatrixSafeLoader | MatrixCSafeLoader, node: yaml.SequenceNode
) -> LList:
    out = llist([], (loader.display, node.start_mark.line + 1))
    for item in node.value:
        out.append(loader.construct_object(item, deep=True))
        out.loc.append((loader.display, item.start_mark.line + 1))
    return out


def _construct_checked_timestamp(
    loader: MatrixSafeLoader | MatrixCSafeLoader, node: yaml.ScalarNode
) -> datetime.date:
    try:
        return SafeConstructor.construct_yaml_timestamp(loader, node)
    except ValueError as error:  # 2026-13-45 looks like a date but is not one
        raise yaml.constructor.ConstructorError(
            None, None, f"invalid date {node.value!r} ({error})", node.start_mark
        ) from None


_Located.add_constructor("tag:yaml.org,2002:timestamp", _construct_checked_timestamp)
_Located.add_constructor("tag:yaml.org,2002:map", _construct_located_map)
_Located.add_constructor("tag:yaml.org,2002:seq", _construct_located_seq)
_Located.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789"))


class MatrixSafeLoader(_Located, yaml.SafeLoader):
    """PyYAML's pure-Python parser, building located containers."""


# libyaml's parser, when PyYAML has it, is about 4x faster here. Syntax errors are
# re-read with the pure-Python parser so their wording does not depend on the build.
_FAST_LOADER: type[MatrixSafeLoader] | type[MatrixCSafeLoader]
if yaml.__with_libyaml__:

    class MatrixCSafeLoader(_Located, yaml.CSafeLoader):
        """libyaml's parser, building located containers."""

    _FAST_LOADER = MatrixCSafeLoader
else:
    _FAST_LOADER = MatrixSafeLoader


def _count_nodes(root: yaml.Node, display: str) -> None:
    """Refuse alias bombs: count nodes as if every alias were expanded."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise ConfigError("recursive YAML alias", file=display, line=node.start_mark.line + 1)
        active.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        active.discard(key)
        if total > MAX_NODES:
            raise ConfigError(
                f"YAML expands to more than {MAX_NODES:,} nodes (alias bomb?)",
                file=display,
                line=node.start_mark.line + 1,
            )
        sizes[key] = total
        return total

    size(root)


def _check_nodes(node: yaml.Node, path: str, display: str, errors: list[ConfigError]) -> None:
    line = node.start_mark.line + 1
    if node.tag not in _PLAIN_TAGS:
        shown = node.tag.replace("tag:yaml.org,2002:", "!!")
        errors.append(
            ConfigError(
                f"YAML tag {shown} is not allowed (plain YAML types only)",
                file=display,
                line=line,
                key=path or None,
            )
        )
        return
    if isinstance(node, yaml.SequenceNode):
        for index, child in enumerate(node.value):
            _check_nodes(child, f"{path}[{index}]", display, errors)
    elif isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                errors.append(
                    ConfigError(
                        "YAML merge keys (<<) are not supported; use extends",
                        file=display,
                        line=key_line,
                        key=path or None,
                    )
                )
                continue
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                shown = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
                errors.append(
                    ConfigError(
                        f"key {shown!r} is not a string (quote it)",
                        file=display,
                        line=key_line,
                        key=path or None,
                    )
                )
                continue
            key = str(key_node.value)
            sub = f"{path}.{key}" if path else key
            if key in first:
                errors.append(
                    ConfigError(
                        f"duplicate key (first at line {first[key]})",
                        file=display,
                        line=key_line,
                        key=sub,
                    )
                )
                continue
            first[key] = key_line
            _check_nodes(value_node, sub, display, errors)


def read_yaml(path: Path, display: str) -> object:
    """Parse one YAML file into LDict/LList/scalars, or raise ConfigError(s)."""
    try:
        size = path.stat().st_size
    except OSError as error:
        raise ConfigError(f"cannot read: {error.strerror}", file=display) from None
    if size > MAX_BYTES:
        raise ConfigError(f"file is {size / (1 << 20):.1f} MiB, over the 1 MiB limit", file=display)
    try:
        text = path.read_bytes()[: MAX_BYTES + 1].decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"not UTF-8 text (byte {error.start})", file=display) from None
    except OSError as error:
        raise ConfigError(f"cannot read: {error.strerror}", file=display) from None
    try:
        return _parse(text, display, _FAST_LOADER)
    except _SyntaxError:
        return _parse(text, display, MatrixSafeLoader, final=True)


class _SyntaxError(Exception):
    pass


def _parse(
    text: str,
    display: str,
    loader_class: type[MatrixSafeLoader] | type[MatrixCSafeLoader],
    final: bool = False,
) -> object:
    loader = loader_class(text)
    loader.display = display
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _count_nodes(node, display)
        errors: list[ConfigError] = []
        _check_nodes(node, "", display, errors)
        if errors:
            raise errors[0] if len(errors) == 1 else ConfigErrors(errors)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        constructing = isinstance(error, yaml.constructor.ConstructorError)
        if not (final or constructing):
            raise _SyntaxError from None
        mark = error.problem_mark or error.context_mark
        problem = error.problem or error.context or "invalid YAML"
        kind = "" if constructing else "YAML syntax error: "
        if mark is None:
            raise ConfigError(f"{kind}{problem}", file=display) from None
        raise ConfigError(
            f"{kind}{problem} (column {mark.column + 1})", file=display, line=mark.line + 1
        ) from None
    except yaml.YAMLError as error:
        if not final:
            raise _SyntaxError from None
        raise ConfigError(f"YAML error: {error}", file=display) from None
    finally:
        loader.dispose()
